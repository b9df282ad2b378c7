"""Operation add_base: add a base class to every class with a given name."""

from __future__ import annotations

import libcst as cst

from forktool.ops.base import Outcome, dotted_tail, parse_expr, same_value
from forktool.ops.seq import insert_item

FIELDS = {"class": True, "base": True}


class _AddBase(cst.CSTTransformer):
    def __init__(self, class_name: str, base: cst.BaseExpression):
        self.class_name, self.base = class_name, base
        self.matches = self.present = 0

    def _same_base(self, existing: cst.BaseExpression) -> bool:
        """Equal AST, or the same class named through another import path (`pkg.Mixin` is `Mixin`)."""
        tail = dotted_tail(self.base)
        return same_value(existing, self.base) or bool(tail) and dotted_tail(existing) == tail

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if updated.name.value != self.class_name:
            return updated
        self.matches += 1
        if any(self._same_base(arg.value) for arg in updated.bases):
            self.present += 1
            return updated
        new_arg = cst.Arg(value=self.base)
        if not updated.bases and updated.keywords:
            # class C(metaclass=M): the new base needs its own comma before the keywords.
            return updated.with_changes(bases=[new_arg.with_changes(comma=cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" ")))])
        return updated.with_changes(bases=insert_item(updated.bases, new_arg))


def apply(module: cst.Module, spec: dict) -> Outcome:
    """Append `base` to the bases of each class named `class` (kept if an equal base is there)."""
    transformer = _AddBase(spec["class"], parse_expr(spec["base"], "base"))
    edited = module.visit(transformer)
    return Outcome(transformer.matches, transformer.present, edited)


def describe(spec: dict) -> str:
    """Short anchor text for messages."""
    return f"class {spec['class']} gains base {spec['base']}"
