"""What every edit operation returns, and the helpers they share."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst

from forktool.vocabulary import EditStatus


@dataclass(frozen=True)
class Outcome:
    """Result of one operation on one module: how many anchors it found and what it did."""

    matches: int
    present: int  # anchors already in the target state
    module: cst.Module  # the edited module (unchanged unless the edit applied)
    note: str = ""  # why an anchor was refused, if one was

    def status(self, expect: int) -> EditStatus:
        """clean (applies), absorbed (already upstream) or broken (anchor count or state is off)."""
        if self.note:
            return EditStatus.BROKEN
        # Every anchor already in the target state: upstream absorbed it, whatever the count.
        if self.present and self.present == self.matches:
            return EditStatus.ABSORBED
        if self.matches != expect or self.present:
            return EditStatus.BROKEN
        return EditStatus.CLEAN


def parse_expr(source: str, field: str) -> cst.BaseExpression:
    """Parse a spec field holding a Python expression; a syntax error names the field."""
    try:
        return cst.parse_expression(source)
    except cst.ParserSyntaxError as exc:
        raise ValueError(f"field '{field}' is not a Python expression: {source!r}") from exc


def parse_statement(source: str, field: str) -> cst.BaseStatement:
    """Parse a spec field holding exactly one Python statement; an error names the field."""
    try:
        module = cst.parse_module(source.strip() + "\n")
    except cst.ParserSyntaxError as exc:
        raise ValueError(f"field '{field}' is not a Python statement: {source!r}") from exc
    if len(module.body) != 1:
        raise ValueError(f"field '{field}' must hold exactly one statement: {source!r}")
    return module.body[0]


def code_of(node: cst.CSTNode) -> str:
    """Exact source text of a node (layout and literals as written)."""
    if isinstance(node, cst.BaseStatement):
        node = node.with_changes(leading_lines=[])
    return cst.Module(body=[]).code_for_node(node)


@lru_cache(maxsize=8192)  # the spec side is compared with every candidate node
def shape(code: str, mode: str = "eval") -> str | None:
    """The one equivalence of every operation: the AST dump of `code`; None when it does not parse."""
    # Quotes, wrapping, comments and implicit concatenation vanish in the AST; every character inside a
    # literal stays, so "fork only" and "forkonly" differ (the old whitespace-stripped text did not).
    try:
        # The newline keeps a trailing comment from swallowing the closing parenthesis.
        return ast.dump(ast.parse(f"({code}\n)" if mode == "eval" else code, mode=mode))
    except SyntaxError:
        return None


def same_value(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """True when two expressions (or two statements) have the same AST, literals compared exactly."""
    mode = "exec" if isinstance(a, cst.BaseStatement) else "eval"
    left = shape(code_of(a), mode)
    return left is not None and left == shape(code_of(b), mode)


def dotted_tail(node: cst.BaseExpression) -> str:
    """Last component of a Name or dotted Attribute (`pkg.Mixin` -> `Mixin`); '' for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""
