"""Operation add_method: a class gains one method, placed right after a method it already has."""

from __future__ import annotations

import libcst as cst

from forktool.ops.base import Outcome, parse_statement, same_value

FIELDS = {"class": True, "after": True, "method": True}


def _parse_method(source: str) -> cst.FunctionDef:
    node = parse_statement(source, "method")
    if not isinstance(node, cst.FunctionDef):
        raise ValueError(f"field 'method' must be one method definition (def ...): {source.strip()[:60]!r}")
    return node


class _AddMethod(cst.CSTTransformer):
    """Counts classes holding the anchor method (matches), those already holding the new one (present)."""

    def __init__(self, class_name: str, after: str, method: cst.FunctionDef):
        self.class_name, self.after, self.method = class_name, after, method
        self.matches = self.present = 0
        self.notes: list[str] = []

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if updated.name.value != self.class_name or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        name = self.method.name.value
        defs = {s.name.value: i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef)}
        if name in defs:
            self.matches += 1
            if same_value(body[defs[name]], self.method):
                self.present += 1
            else:
                # Upstream wrote its own version: ours would silently replace (or be shadowed by) it.
                self.notes.append(f"class {self.class_name} already defines {name}() differently; "
                                  "compare it with the spec's method and update or drop the edit")
            return updated
        if self.after not in defs:
            return updated
        self.matches += 1
        at = defs[self.after] + 1
        new = self.method.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body.insert(at, new)
        return updated.with_changes(body=updated.body.with_changes(body=body))


def apply(module: cst.Module, spec: dict) -> Outcome:
    """Add `method` to each class named `class`, right after its method `after` (kept if an equal one is there)."""
    method = _parse_method(spec["method"])
    if not spec["after"].isidentifier():
        raise ValueError(f"field 'after' must be a method name: {spec['after']!r}")
    transformer = _AddMethod(spec["class"], spec["after"], method)
    edited = module.visit(transformer)
    notes = "; ".join(transformer.notes)
    return Outcome(transformer.matches, transformer.present, edited if not notes else module, notes)


def describe(spec: dict) -> str:
    """Short anchor text for messages."""
    try:
        name = _parse_method(spec["method"]).name.value
    except ValueError:
        name = "?"
    return f"class {spec['class']} gains {name}() after {spec['after']}()"

