"""Operations scoped to one function: replace_expression, insert_statement and add_sibling."""

from __future__ import annotations

import libcst as cst

from forktool.ops.base import Outcome, parse_expr, parse_statement, same_value
from forktool.ops.seq import insert_item

REPLACE_FIELDS = {"function": True, "old": True, "new": True, "occurrence": False}
INSERT_FIELDS = {"function": True, "before": True, "statement": True}


class _InFunction(cst.CSTTransformer):
    """Tracks whether the walk is inside the function named `Class.method` (or plain `function`)."""

    def __init__(self, qualname: str):
        self.qualname, self.scope, self.depth = qualname, [], 0
        self.matches = self.present = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.append(node.name.value)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.scope.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.append(node.name.value)
        if ".".join(self.scope) == self.qualname:
            self.depth += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if ".".join(self.scope) == self.qualname:
            self.depth -= 1
        self.scope.pop()
        return updated


class _ReplaceExpression(_InFunction):
    def __init__(self, qualname: str, old: cst.BaseExpression, new: cst.BaseExpression, nth: int | None = None):
        super().__init__(qualname)
        self.old, self.new, self.nth = old, new, nth
        self.done: set[int] = set()
        self.seen = 0  # sites holding `old` or already `new`, in source order

    def _chosen(self) -> bool:
        self.seen += 1
        return self.nth is None or self.seen == self.nth

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not super().on_visit(node):
            return False
        if self.depth and isinstance(node, type(self.new)) and same_value(node, self.new):
            # Already the target state; do not look inside (`new` may contain `old`, e.g. a guard around it).
            if self._chosen():
                self.matches += 1
                self.present += 1
            self.done.add(id(node))
            return False
        return True

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        updated = super().on_leave(original, updated)
        if not self.depth or id(original) in self.done or not isinstance(original, type(self.old)):
            return updated
        if same_value(original, self.old) and self._chosen():
            self.matches += 1
            return self.new
        return updated


class _InsertStatement(_InFunction):
    def __init__(self, qualname: str, before: cst.BaseStatement, statement: cst.BaseStatement):
        super().__init__(qualname)
        self.before, self.statement = before, statement

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not self.depth:
            return updated
        body: list[cst.BaseStatement] = []
        for stmt in updated.body:
            if same_value(stmt, self.before):
                self.matches += 1
                if body and same_value(body[-1], self.statement):
                    self.present += 1
                else:
                    # The anchor's blank lines and comments now sit above the inserted statement.
                    body.append(self.statement.with_changes(leading_lines=stmt.leading_lines))
                    stmt = stmt.with_changes(leading_lines=[])
            body.append(stmt)
        return updated.with_changes(body=body)


def apply_replace(module: cst.Module, spec: dict) -> Outcome:
    """Replace each expression equal to `old` (layout ignored) in `function`, or only the `occurrence`-th, by `new`."""
    nth = int(spec["occurrence"]) if "occurrence" in spec else None
    transformer = _ReplaceExpression(spec["function"], parse_expr(spec["old"], "old"), parse_expr(spec["new"], "new"),
                                     nth)
    edited = module.visit(transformer)
    return Outcome(transformer.matches, transformer.present, edited)


def apply_insert(module: cst.Module, spec: dict) -> Outcome:
    """Insert `statement` right before each statement equal to `before` inside `function`."""
    transformer = _InsertStatement(spec["function"], parse_statement(spec["before"], "before"),
                                   parse_statement(spec["statement"], "statement"))
    edited = module.visit(transformer)
    return Outcome(transformer.matches, transformer.present, edited)


def describe_replace(spec: dict) -> str:
    """Short anchor text for messages."""
    return f"in {spec['function']}: expression {spec['old']!r}"


def describe_insert(spec: dict) -> str:
    """Short anchor text for messages."""
    return f"in {spec['function']}: statement {spec['before']!r}"


SIBLING_FIELDS = {"function": True, "beside": True, "value": True, "key": False}


class _AddSibling(_InFunction):
    """In `function`, each list/tuple/set holding `beside` (or dict keyed by it) gains an item after it."""

    def __init__(self, qualname: str, beside: cst.BaseExpression, value: cst.BaseExpression,
                 key: cst.BaseExpression | None):
        super().__init__(qualname)
        self.beside, self.value, self.key = beside, value, key

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        updated = super().on_leave(original, updated)
        dict_mode = self.key is not None
        if not self.depth or not isinstance(updated, cst.Dict if dict_mode else (cst.List, cst.Tuple, cst.Set)):
            return updated
        elements = list(updated.elements)
        anchor = _index_of(elements, self.beside, dict_mode)
        if anchor is None:
            return updated
        self.matches += 1
        if _index_of(elements, self.key if dict_mode else self.value, dict_mode) is not None:
            self.present += 1
            return updated
        new = cst.DictElement(key=self.key, value=self.value) if dict_mode else cst.Element(value=self.value)
        return updated.with_changes(elements=insert_item(elements, new, anchor + 1))


def _index_of(elements: list, wanted: cst.BaseExpression, dict_mode: bool) -> int | None:
    for index, element in enumerate(elements):
        node = element.key if dict_mode and isinstance(element, cst.DictElement) else (
            element.value if not dict_mode and isinstance(element, cst.Element) else None)
        if node is not None and same_value(node, wanted):
            return index
    return None


def apply_sibling(module: cst.Module, spec: dict) -> Outcome:
    """Add `value` (or `key: value`) right after the element (or key) `beside` inside `function`."""
    key = parse_expr(spec["key"], "key") if "key" in spec else None
    transformer = _AddSibling(spec["function"], parse_expr(spec["beside"], "beside"),
                              parse_expr(spec["value"], "value"), key)
    edited = module.visit(transformer)
    return Outcome(transformer.matches, transformer.present, edited)


def describe_sibling(spec: dict) -> str:
    """Short anchor text for messages."""
    item = f"{spec['key']}: {spec['value']}" if "key" in spec else spec["value"]
    return f"in {spec['function']}: {item} after {spec['beside']}"
