"""Operation capture_aux_hidden_states: a decoder records EAGLE3 aux hidden states inside its layer loop.

The shape upstream gives decoders that inherit `EagleModelMixin` (llama.py, qwen3_moe.py): record the
stream entering the first layer, record it again after each layer call (as the input of layer i + 1), and
return `(hidden, aux)` once aux layers are set. The mixin's own `_maybe_add_hidden_state` decides whether a
layer is chosen and adds the residual when there is one, so a post-norm or parallel-block layer (which
returns the whole stream) passes `residual = "None"`.
"""

from __future__ import annotations

import libcst as cst

from forktool.ops.base import Outcome, code_of, dotted_tail, parse_expr, parse_statement, same_value
from forktool.ops.seq import insert_item

FIELDS = {"function": True, "loop": True, "after": True, "hidden": False, "residual": False,
          "returns": False, "start": False, "index": False, "mixin": False}
AUX = "aux_hidden_states"
# What the forward now also returns, as upstream's llama.py annotates it.
WITH_AUX = "tuple[torch.Tensor, list[torch.Tensor]]"


class _Spec:
    """The parsed fields and the statements they generate."""

    def __init__(self, spec: dict):
        self.function = spec["function"]
        self.loop = parse_expr(spec["loop"], "loop")
        self.after = parse_statement(spec["after"], "after")
        self.hidden = spec.get("hidden", "hidden_states")
        self.residual = spec.get("residual", "residual")
        self.returns = spec.get("returns", "hidden_states")
        for field, value in (("hidden", self.hidden), ("residual", self.residual), ("returns", self.returns)):
            parse_expr(value, field)
        self.start = spec.get("start")
        if self.start is not None:
            parse_expr(self.start, "start")
        self.index = spec.get("index", "layer_idx")
        if not self.index.isidentifier():
            raise ValueError(f"field 'index' must be a Python name: {self.index!r}")
        self.mixin = parse_expr(spec.get("mixin", "EagleModelMixin"), "mixin")
        # A decoder base named as the mixin owns the forward this one overrides: its annotation stays the base's.
        self.widen = "mixin" not in spec
        self.return_anchor = parse_statement(f"return {self.returns}", "returns")
        self.guard = parse_statement(f"if len({AUX}) > 0:\n    return {self.returns}, {AUX}", "returns")

    def first(self, start: str) -> cst.BaseStatement:
        """The capture before the loop: the stream entering the first layer."""
        return parse_statement(f"{AUX} = self._maybe_add_hidden_state([], {start}, {self.hidden}, {self.residual})",
                          "start")

    def each(self, index: str) -> cst.BaseStatement:
        """The capture after the layer call: the stream entering layer index + 1."""
        return parse_statement(f"self._maybe_add_hidden_state({AUX}, {index} + 1, {self.hidden}, {self.residual})",
                          "index")


def _union_members(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return _union_members(node.left) + _union_members(node.right)
    return [node]


def _widened(function: cst.FunctionDef) -> cst.FunctionDef:
    """A return annotation that also admits `(hidden, aux)`, once the forward can return it."""
    returns = function.returns
    aux = cst.parse_expression(WITH_AUX)
    if returns is None or any(same_value(m, aux) for m in _union_members(returns.annotation)):
        return function
    wider = cst.BinaryOperation(returns.annotation, cst.BitOr(), aux)
    return function.with_changes(returns=returns.with_changes(annotation=wider))


def _call_name(node: cst.BaseExpression) -> str:
    return node.func.value if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) else ""


def _loop_index(node: cst.For, spec: _Spec) -> tuple[str, str, cst.For] | None:
    """(index name, first index, the loop with an index) when `node` iterates over `loop`; else None."""
    it = node.iter
    if same_value(it, spec.loop) or _call_name(it) == "enumerate" and same_value(it.args[0].value, spec.loop):
        if _call_name(it) == "enumerate" and isinstance(node.target, cst.Tuple):
            start = next((code_of(a.value) for a in it.args[1:] if a.keyword is None or a.keyword.value == "start"),
                         "0")
            return code_of(node.target.elements[0].value), spec.start or start, node
        if _call_name(it) == "range" and isinstance(node.target, cst.Name):
            start = code_of(it.args[0].value) if len(it.args) > 1 else "0"
            return node.target.value, spec.start or start, node
        start = spec.start or "self.start_layer"
        wrapped = cst.parse_expression(f"enumerate({code_of(it)}, start={start})")
        target = cst.parse_expression(f"{spec.index}, {code_of(node.target)}")
        return spec.index, start, node.with_changes(iter=wrapped, target=target)
    return None


class _Capture(cst.CSTTransformer):
    """Rewrites the one function; counts loops (matches), loops already capturing (present) and problems."""

    def __init__(self, spec: _Spec):
        self.spec, self.scope, self.depth = spec, [], 0
        self.matches = self.present = 0
        self.notes: list[str] = []
        self.returns = self.guarded = 0
        self.owner_found = False
        self.rewrote = False  # a loop was made to capture: the return annotation must admit (hidden, aux)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.append(node.name.value)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        owner = ".".join(self.scope) == self.spec.function.rpartition(".")[0]
        self.scope.pop()
        if not owner or not self.owner_found:
            return updated
        self.owner_found = False
        tail = dotted_tail(self.spec.mixin)
        if any(same_value(a.value, self.spec.mixin) or tail and dotted_tail(a.value) == tail for a in updated.bases):
            return updated
        if self.matches and self.present == self.matches:
            self.notes.append(f"class {updated.name.value} captures but lacks base {code_of(self.spec.mixin)}")
            return updated
        return updated.with_changes(bases=insert_item(updated.bases, cst.Arg(value=self.spec.mixin)))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.append(node.name.value)
        if ".".join(self.scope) == self.spec.function:
            self.depth += 1
            self.owner_found = True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if ".".join(self.scope) == self.spec.function:
            self.depth -= 1
            if self.rewrote and self.spec.widen:
                updated = _widened(updated)
        self.scope.pop()
        return updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not self.depth:
            return updated
        body: list[cst.BaseStatement] = []
        for stmt in updated.body:
            if isinstance(stmt, cst.For) and (found := _loop_index(stmt, self.spec)):
                stmt = self._loop(stmt, found, body)
            elif same_value(stmt, self.spec.return_anchor):
                self.returns += 1
                if body and same_value(body[-1], self.spec.guard):
                    self.guarded += 1
                else:
                    body.append(self.spec.guard.with_changes(leading_lines=stmt.leading_lines))
                    stmt = stmt.with_changes(leading_lines=[])
            body.append(stmt)
        return updated.with_changes(body=body)

    def _loop(self, loop: cst.For, found: tuple[str, str, cst.For], body: list[cst.BaseStatement]) -> cst.For:
        """Capture inside one matching loop and before it; `body` is the enclosing block so far."""
        index, start, indexed = found
        self.matches += 1
        inner = list(indexed.body.body)
        at = [i for i, s in enumerate(inner) if same_value(s, self.spec.after)]
        if len(at) != 1:
            self.notes.append(f"the loop over {code_of(self.spec.loop)} holds `{code_of(self.spec.after).strip()}` "
                              f"{len(at)} time(s), expected 1; the anchor drifted upstream: update the spec")
            return loop
        each, first = self.spec.each(index), self.spec.first(start)
        has_each = at[0] + 1 < len(inner) and same_value(inner[at[0] + 1], each)
        has_first = bool(body) and same_value(body[-1], first)
        if has_each and has_first and indexed is loop:
            self.present += 1
            return loop
        if has_each or has_first:
            self.notes.append(f"the loop over {code_of(self.spec.loop)} is partly capturing already; "
                              "finish or undo it by hand")
            return loop
        inner.insert(at[0] + 1, each)
        self.rewrote = True
        body.append(first.with_changes(leading_lines=loop.leading_lines))
        return indexed.with_changes(leading_lines=[], body=indexed.body.with_changes(body=inner))


def apply(module: cst.Module, spec: dict) -> Outcome:
    """Record aux hidden states in the loop over `loop` inside `function` and return them beside the output."""
    parsed = _Spec(spec)
    transformer = _Capture(parsed)
    edited = module.visit(transformer)
    notes = transformer.notes
    if transformer.matches and not notes and transformer.returns != 1:
        notes.append(f"`return {parsed.returns}` appears {transformer.returns} time(s) in {parsed.function}, "
                     "expected 1; set 'returns' or update the spec")
    elif transformer.matches and not notes and (transformer.guarded == 1) != (transformer.present > 0):
        notes.append(f"{parsed.function} is partly capturing already; finish or undo it by hand")
    return Outcome(transformer.matches, transformer.present, edited if not notes else module, "; ".join(notes))


def describe(spec: dict) -> str:
    """Short anchor text for messages."""
    return f"in {spec['function']}: capture after {spec['after']!r} in the loop over {spec['loop']!r}"
