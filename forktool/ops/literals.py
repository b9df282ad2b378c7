"""Operations add_entry (dict/set/list/tuple literal) and add_literal_member (`X = Literal[...]`)."""

from __future__ import annotations

import libcst as cst

from forktool.ops.base import Outcome, parse_expr, same_value
from forktool.ops.seq import insert_item

ENTRY_FIELDS = {"target": True, "key": False, "value": True}
MEMBER_FIELDS = {"alias": True, "value": True}

_SEQUENCES = (cst.List, cst.Set, cst.Tuple)


def _assigned_name(node: cst.CSTNode) -> str | None:
    """Name bound by `X = ...`, `X: T = ...` or `type X = ...`; None for anything else."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        target = node.targets[0].target
        return target.value if isinstance(target, cst.Name) else None
    if isinstance(node, (cst.AnnAssign, cst.TypeAlias)):
        target = node.target if isinstance(node, cst.AnnAssign) else node.name
        return target.value if isinstance(target, cst.Name) else None
    return None


class _EditAssigned(cst.CSTTransformer):
    """Rewrites the value of each assignment to `name` through `edit(value) -> (value, present, note)`."""

    def __init__(self, name: str, edit):
        self.name, self.edit = name, edit
        self.matches = self.present = 0
        self.note = ""

    def _leave(self, original, updated):
        if _assigned_name(updated) != self.name or updated.value is None:
            return updated
        result = self.edit(updated.value)
        if result is None:  # not the literal kind this operation edits
            return updated
        value, present, note = result
        self.matches += 1
        self.present += present
        self.note = self.note or note
        return updated.with_changes(value=value)

    leave_Assign = leave_AnnAssign = leave_TypeAlias = _leave


def _run(module: cst.Module, name: str, edit) -> Outcome:
    transformer = _EditAssigned(name, edit)
    edited = module.visit(transformer)
    return Outcome(transformer.matches, transformer.present, edited, transformer.note)


def apply_entry(module: cst.Module, spec: dict) -> Outcome:
    """Append key: value to the dict literal (or value to the list/set/tuple) assigned to `target`."""
    value = parse_expr(spec["value"], "value")
    key = parse_expr(spec["key"], "key") if "key" in spec else None

    def edit(literal):
        if key is not None:
            if not isinstance(literal, cst.Dict):
                return None
            for element in literal.elements:
                if isinstance(element, cst.DictElement) and same_value(element.key, key):
                    if same_value(element.value, value):
                        return literal, 1, ""
                    return literal, 0, f"key {spec['key']} is there with another value"
            new = cst.DictElement(key=key, value=value)
        else:
            if not isinstance(literal, _SEQUENCES):
                return None
            if any(isinstance(e, cst.Element) and same_value(e.value, value) for e in literal.elements):
                return literal, 1, ""
            new = cst.Element(value=value)
        return literal.with_changes(elements=insert_item(literal.elements, new)), 0, ""

    return _run(module, spec["target"], edit)


def _is_literal(node: cst.BaseExpression) -> bool:
    base = node.value if isinstance(node, cst.Subscript) else None
    return (isinstance(base, cst.Name) and base.value == "Literal") or (
        isinstance(base, cst.Attribute) and base.attr.value == "Literal"
    )


def apply_member(module: cst.Module, spec: dict) -> Outcome:
    """Append `value` to the members of the `Literal[...]` that the alias `alias` is bound to."""
    value = parse_expr(spec["value"], "value")

    def edit(literal):
        if not _is_literal(literal):
            return None
        if any(same_value(element.slice.value, value) for element in literal.slice
               if isinstance(element.slice, cst.Index)):
            return literal, 1, ""
        new = cst.SubscriptElement(slice=cst.Index(value=value))
        return literal.with_changes(slice=insert_item(literal.slice, new)), 0, ""

    return _run(module, spec["alias"], edit)


def describe_entry(spec: dict) -> str:
    """Short anchor text for messages."""
    item = f"{spec['key']}: {spec['value']}" if "key" in spec else spec["value"]
    return f"literal {spec['target']} gains {item}"


def describe_member(spec: dict) -> str:
    """Short anchor text for messages."""
    return f"Literal alias {spec['alias']} gains {spec['value']}"
