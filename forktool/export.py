"""`export-pr`: the upstreamable edits as the PR series of upstream-prs/series.toml, one `git am` patch per PR."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import zipfile
from pathlib import Path

from forktool import overlay as overlay_mod
from forktool.apply import apply_edits, require_no_broken
from forktool.atomic import atomic_dir
from forktool.errors import ForkError
from forktool.format import format_sources
from forktool.project import Project
from forktool.series import TESTS_ROOT, PullRequest
from forktool.specs import Edit
from forktool.vocabulary import EditStatus

# Overlay files that exist only to describe or extend the fork build; they are never proposed upstream.
FORK_ONLY_OVERLAY = ("vllm/_fork/",)
_HEADER = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
_DATE = "Thu, 1 Jan 1970 00:00:00 +0000"  # fixed: the same inputs give the same bytes
_IDENTITY = re.compile(r"[^<>\n]+ <[^<>@\s]+@[^<>\s]+>")
SIGNOFF_HELP = ('set FORKTOOL_SIGNOFF="Your Name <you@example.com>" or git config user.name and '
                "user.email (vLLM requires a DCO sign-off on every commit)")


def signoff_identity(root: Path) -> str:
    """`Name <email>` for From: and Signed-off-by: from FORKTOOL_SIGNOFF, else git's user.name/user.email."""
    value = os.environ.get("FORKTOOL_SIGNOFF", "").strip()
    if not value:
        found = []
        for key in ("user.name", "user.email"):
            try:
                done = subprocess.run(["git", "config", key], cwd=root, capture_output=True, text=True)
            except OSError:
                break
            found.append(done.stdout.strip() if done.returncode == 0 else "")
        if len(found) == 2 and all(found):
            value = f"{found[0]} <{found[1]}>"
    if not value:
        raise ForkError(f"no identity for Signed-off-by: {SIGNOFF_HELP}")
    if not _IDENTITY.fullmatch(value):
        raise ForkError(f"Signed-off-by identity {value!r} is not 'Name <email>': {SIGNOFF_HELP}")
    return value


def _diff(path: str, old: str | None, new: str) -> str:
    """A git-style unified diff of one file; old None means a new file."""
    a = old.splitlines(keepends=True) if old is not None else []
    lines = difflib.unified_diff(a, new.splitlines(keepends=True),
                                 "/dev/null" if old is None else f"a/{path}", f"b/{path}")
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if old is None else "")
    return head + "".join(lines)


def _message(pr: PullRequest, identity: str) -> str:
    """The PR's description as upstream reads it (series.toml's body) and the DCO sign-off."""
    return f"{pr.body}\n\nSigned-off-by: {identity}\n"


def _patch(number: int, total: int, pr: PullRequest, message: str, identity: str, diffs: list[str]) -> str:
    return (f"{_HEADER}From: {identity}\nDate: {_DATE}\nSubject: [PATCH {number}/{total}] {pr.title}\n\n"
            f"{message.strip()}\n---\n{''.join(diffs)}-- \nforktool\n")


def _stages(series: list[PullRequest], edits: list[Edit], originals: dict[str, str]):
    """Apply the series PR by PR: per PR its live edits and, per file it changes, the raw text before and after
    it; then every result, and the raw text of each file after the whole series."""
    current = dict(originals)
    plans, every = [], []
    for pr in series:
        own = [e for e in edits if e.pr == pr.id]  # sorted by file, spec order within it
        before = {t: current[t] for t in {e.target for e in own} if t in current}
        changed, results = apply_edits(before, own)
        every += results
        current.update(changed)
        live = [r.edit for r in results if r.status == EditStatus.CLEAN]
        plans.append((pr, live, {t: (before[t], changed[t]) for t in sorted(changed)}))
    return plans, every, current


def _formatted(root: Path, plans, originals: dict[str, str], modules) -> dict[tuple[str, str], str]:
    """(file, raw text) -> upstream-formatted text, for every edited version, in one ruff batch."""
    raw = sorted({(t, text) for _, _, files in plans for t, pair in files.items() for text in pair
                  if text != originals[t]})
    done = format_sources(root, [{t: text} for t, text in raw], modules)
    return {key: version[key[0]] for key, version in zip(raw, done)}


def export_series(project: Project, upstream_wheel: Path, out_dir: Path, identity: str,
                  notes: list[str] | None = None) -> list[Path]:
    """Write out_dir/NNNN-<pr id>.patch (replacing out_dir atomically): one patch per PR with live edits, its
    tests included; a PR whose edits are all absorbed upstream gives none (a line in `notes`). Broken edits
    (fork-only ones too, applied after the series) and overlay files that replace upstream ones stop it."""
    series, edits = project.series(), project.edits()
    overlay = project.overlay()
    stray = sorted(p for p in overlay if not p.startswith(FORK_ONLY_OVERLAY))
    if stray:
        raise ForkError(f"{stray[0]}: overlay file outside {FORK_ONLY_OVERLAY[0]} that no PR carries; "
                        "export-pr only proposes edits (move it under vllm/_fork/ or make it an edit)")
    with zipfile.ZipFile(upstream_wheel) as zin:
        names = set(zin.namelist())
        originals = {t: zin.read(t).decode("utf-8") for t in {e.target for e in edits} if t in names}
    plans, results, final = _stages(series, [e for e in edits if not e.fork_only], originals)
    fork_only = [e for e in edits if e.fork_only]
    results += apply_edits({t: final[t] for t in {e.target for e in fork_only} if t in final}, fork_only)[1]
    require_no_broken(results)
    overlay_mod.require_new(overlay, names, upstream_wheel.name)
    pretty = _formatted(project.root, plans, originals, names)
    patches: list[tuple[PullRequest, list[Edit], list[str]]] = []
    for pr, live, files in plans:
        diffs = [_diff(t, pretty.get((t, old), old), pretty[t, new]) for t, (old, new) in files.items()]
        if not diffs:
            if notes is not None:
                notes.append(f"absorbed: pr '{pr.id}' (upstream already has every edit; no patch)")
            continue
        tests = [_diff(test, None, (project.root / TESTS_ROOT / test).read_text(encoding="utf-8"))
                 for test in pr.tests]
        patches.append((pr, live, diffs + tests))
    written = []
    with atomic_dir(out_dir) as tmp:
        for number, (pr, live, diffs) in enumerate(patches, 1):
            name = f"{number:04d}-{pr.id}.patch"
            text = _patch(number, len(patches), pr, _message(pr, identity), identity, diffs)
            (tmp / name).write_text(text, encoding="utf-8")
            written.append(out_dir / name)
    return written
