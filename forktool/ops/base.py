"""What every edit operation returns, and the helpers they share."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from forktool.ops.seq import node_code


@dataclass(frozen=True)
class Outcome:
    """Result of one operation on one module: how many anchors it found and what it did."""

    matches: int
    present: int  # anchors already in the target state
    module: cst.Module  # the edited module (unchanged unless the edit applied)
    note: str = ""  # why an anchor was refused, if one was

    def status(self, expect: int) -> str:
        """clean (applies), absorbed (already upstream) or broken (anchor count or state is off)."""
        if self.note:
            return "broken"
        # Every anchor already in the target state: upstream absorbed it, whatever the count.
        if self.present and self.present == self.matches:
            return "absorbed"
        if self.matches != expect or self.present:
            return "broken"
        return "clean"


def parse_expr(source: str, field: str) -> cst.BaseExpression:
    """Parse a spec field holding a Python expression; a syntax error names the field."""
    try:
        return cst.parse_expression(source)
    except cst.ParserSyntaxError as exc:
        raise ValueError(f"field '{field}' is not a Python expression: {source!r}") from exc


def same_value(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """True when two expressions denote the same literal (quotes and layout ignored) or read the same."""
    ca, cb = node_code(a), node_code(b)
    if ca == cb:
        return True
    try:
        return ast.literal_eval(ca) == ast.literal_eval(cb)
    except (ValueError, SyntaxError):
        return False


def dotted_tail(node: cst.BaseExpression) -> str:
    """Last component of a Name or dotted Attribute (`pkg.Mixin` -> `Mixin`); '' for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""
