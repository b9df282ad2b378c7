"""`export-pr`: a deterministic patch series against upstream, one patch per spec file."""

from __future__ import annotations

import difflib
import zipfile
from itertools import groupby
from pathlib import Path

from forktool.atomic import atomic_dir
from forktool.project import Project, assemble

# Overlay files that exist only to describe the fork build; they are never proposed upstream.
FORK_ONLY_OVERLAY = ("vllm/_fork/",)
_HEADER = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
_AUTHOR = "From: vLLM EAGLE3 fork <fork@invalid>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\n"


def _diff(path: str, old: str | None, new: str) -> str:
    """A git-style unified diff of one file; old None means a new file."""
    a = old.splitlines(keepends=True) if old is not None else []
    lines = difflib.unified_diff(a, new.splitlines(keepends=True),
                                 "/dev/null" if old is None else f"a/{path}", f"b/{path}")
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if old is None else "")
    return head + "".join(lines)


def _patch(number: int, total: int, subject: str, body: str, diffs: list[str]) -> str:
    return (f"{_HEADER}{_AUTHOR}Subject: [PATCH {number}/{total}] {subject}\n\n{body.rstrip()}\n"
            f"---\n{''.join(diffs)}-- \nforktool\n")


def _edit_message(edits) -> tuple[str, str]:
    """Subject from the spec's title; body with every live edit's provenance."""
    subject = edits[0].title
    body = "\n\n".join(
        f"{e.id} ({e.op})\nWhy: {e.why}\nUpstream: {e.upstream}\nRemove when: {e.remove_when}"
        for e in edits)
    return subject, body


def uses_fork_only_overlay(edits) -> bool:
    """An edit that names the fork-only overlay (`vllm._fork…`) cannot be proposed upstream as it is."""
    return any("vllm._fork" in str(value) for e in edits for value in e.params.values())


def export_series(project: Project, upstream_wheel: Path, out_dir: Path,
                  notes: list[str] | None = None) -> list[Path]:
    """Write out_dir/NNNN-*.patch (replacing out_dir atomically); absorbed edits produce nothing.

    Specs whose edits use the fork-only overlay are not exported; each gets a line in `notes`."""
    with zipfile.ZipFile(upstream_wheel) as zin:
        names = set(zin.namelist())
        fork = assemble(project, lambda p: zin.read(p).decode("utf-8"), names)
        fork.require_buildable(names, upstream_wheel.name)
        originals = {path: zin.read(path).decode("utf-8") for path in fork.changed}
    patches: list[tuple[str, str, list[str]]] = []
    for _, group in groupby(fork.results, key=lambda r: r.edit.spec_file):
        live = [r.edit for r in group if r.status == "clean"]
        if live and uses_fork_only_overlay(live):
            if notes is not None:
                notes.append(f"not exported: {live[0].spec_file} (uses vllm._fork, which stays in the fork)")
            continue
        if live:
            subject, body = _edit_message(live)
            target = live[0].target
            patches.append((subject, body, [_diff(target, originals[target], fork.changed[target])]))
    overlay = {p: d for p, d in fork.overlay.items() if not p.startswith(FORK_ONLY_OVERLAY)}
    if overlay:
        body = "New files of the fork, at their path inside vLLM:\n" + "\n".join(overlay)
        patches.append(("[Model] Add the fork's new modules", body,
                        [_diff(path, None, data.decode("utf-8")) for path, data in overlay.items()]))
    written = []
    with atomic_dir(out_dir) as tmp:
        for number, (subject, body, diffs) in enumerate(patches, 1):
            slug = "-".join("".join(c if c.isalnum() else " " for c in subject.lower()).split())[:60]
            name = f"{number:04d}-{slug}.patch"
            (tmp / name).write_text(_patch(number, len(patches), subject, body, diffs))
            written.append(out_dir / name)
    return written
