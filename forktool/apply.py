"""Apply a set of edits to upstream sources held in memory, reporting each edit's fate."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

import libcst as cst

from forktool import resultcache
from forktool.errors import FindingsError, ForkError
from forktool.ops import OPERATIONS, imports
from forktool.specs import Edit
from forktool.vocabulary import EditStatus


@dataclass(frozen=True)
class EditResult:
    """clean (applied), absorbed (already upstream), broken, or, on an older test-only base, absent (no such
    file) or skipped (named by --skip)."""

    edit: Edit
    status: EditStatus
    detail: str = ""

    def line(self) -> str:
        """The report line for this edit."""
        tail = f" — {self.detail}" if self.detail else ""
        return f"{self.status:8} {self.edit.label}{tail}"


def _apply_one(module: cst.Module, edit: Edit) -> tuple[cst.Module, EditResult]:
    try:
        outcome = OPERATIONS[edit.op].apply(module, edit.params)
    except ValueError as exc:
        raise ForkError(f"{edit.label}: {exc}") from exc
    status = outcome.status(edit.expect)
    if status == EditStatus.BROKEN:
        detail = outcome.note or (
            f"matched {outcome.matches} place(s), expected {edit.expect}"
            + (f", {outcome.present} already in the target state" if outcome.present else "")
            + "; the anchor drifted upstream: update the spec"
        )
        return module, EditResult(edit, status, detail)
    if status == EditStatus.ABSORBED:
        return module, EditResult(edit, status, "already upstream; see remove_when")
    edited = outcome.module
    for name_module, name in edit.imports:  # the edit asks for the imports its code needs, as a LibCST codemod
        added = imports.apply(edited, {"module": name_module, "name": name})
        if added.note:
            return module, EditResult(edit, EditStatus.BROKEN, f"import {name} from {name_module}: {added.note}")
        edited = added.module
    return edited, EditResult(edit, status)


def apply_edits(sources: dict[str, str], edits: list[Edit],
                missing: EditStatus = EditStatus.BROKEN) -> tuple[dict[str, str], list[EditResult]]:
    """Edited text of every touched file that changed, and one result per edit (in spec order).

    `missing` is the status of edits whose file is not in `sources` (broken, or absent when allowed)."""
    changed: dict[str, str] = {}
    results: list[EditResult] = []
    for target, group in groupby(edits, key=lambda e: e.target):
        group = list(group)
        if target not in sources:
            results += [EditResult(e, missing, f"upstream has no file {target}") for e in group]
            continue
        code, file_results = _apply_file(sources[target], target, group)
        results += file_results
        if code != sources[target]:
            changed[target] = code
    return changed, results


def _apply_file(source: str, target: str, group: list[Edit]) -> tuple[str, list[EditResult]]:
    """One upstream file with its edits applied in order, from the result cache when it was applied so before."""
    entry = apply_key(source, group)
    cached = resultcache.load("applied", entry)
    if cached is not None:
        try:
            outcomes = [(EditStatus(status), detail) for status, detail in cached["results"]]
        except (KeyError, TypeError, ValueError):  # a damaged or foreign entry: applied again below
            outcomes = []
        if len(outcomes) == len(group) and isinstance(cached.get("code"), str):
            return cached["code"], [EditResult(edit, s, d) for edit, (s, d) in zip(group, outcomes)]
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise ForkError(f"{group[0].spec_file}: upstream {target} does not parse ({exc.message})") from exc
    results = []
    for edit in group:
        module, result = _apply_one(module, edit)
        results.append(result)
    resultcache.store("applied", entry, {"code": module.code, "results": [[r.status, r.detail] for r in results]})
    return module.code, results


def apply_key(source: str, group: list[Edit]) -> str:
    """What one file's result depends on: the engine's code, LibCST, the file and each edit's op, params, expect."""
    engine = resultcache.code_digest("apply.py", "ops/*.py", packages=("libcst",))
    return resultcache.key(engine, source, [[e.op, e.params, e.expect, e.imports] for e in group])


def require_no_broken(results: list[EditResult]) -> None:
    """Stop the build at broken edits: one line per culprit."""
    broken = [r.line() for r in results if r.status == EditStatus.BROKEN]
    if broken:
        raise FindingsError("\n".join(broken))
