"""Command line: python -m forktool {build,tree,export-pr,check,audit,arch-history,ledger}."""

from __future__ import annotations

import argparse
import ast
import json
import sys
import traceback
import zipfile
from pathlib import Path

from forktool.errors import ForkError
from forktool.fetch import fetch
from forktool.manifest import MANIFEST_PATH
from forktool.options import BuildOptions, add_base_flags
from forktool.project import Project
from forktool.vocabulary import Exit


def _shipped_manifest(wheel: Path) -> dict:
    """The provenance manifest the build wrote into `wheel` (vllm/_fork/_manifest.py) as data."""
    with zipfile.ZipFile(wheel) as zin:
        module = ast.parse(zin.read(MANIFEST_PATH).decode("utf-8"))
    return json.loads(ast.literal_eval(module.body[-1].value))


def _build(args, project: Project) -> int:
    from forktool.build import build

    options = BuildOptions(out=Path(args.out), label=args.label, allow_absent=args.allow_absent,
                           skip=frozenset(args.skip))
    built = build(project, options)
    if args.json:
        print(json.dumps({"wheel": str(built.path), "manifest": _shipped_manifest(built.path),
                          "internals": [r.as_dict() for r in built.internals]}, indent=1, sort_keys=True))
    else:
        print(built.path)
    return Exit.OK


def _tree(args, project: Project) -> int:
    from forktool.build import build_tree

    print(build_tree(project, BuildOptions(out=Path(args.out), label=args.label)).path)
    return Exit.OK


def _export(args, project: Project) -> int:
    from forktool.export import export_series, signoff_identity

    identity = signoff_identity(project.root)  # before any download: a missing identity is bad input
    wheel, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    notes: list[str] = []
    patches = export_series(project, wheel, Path(args.out), identity, notes)
    if args.json:
        print(json.dumps({"patches": [str(p) for p in patches], "notes": notes}, indent=1))
        return Exit.OK
    for patch in patches:
        print(patch)
    for note in notes:
        print(note, file=sys.stderr)
    return Exit.OK


def _check(args, project: Project) -> int:
    from forktool.check import check_base

    return check_base(project, args.base, args.json)


def _audit(args, project: Project) -> int:
    from forktool.audit.run import run_audit

    return run_audit(project, args.tree, args.json, args.verbose)


def _history(args, project: Project) -> int:
    from forktool.history import HISTORY_PATH, write_history

    write_history(args.base, project.root / HISTORY_PATH)
    print(f"wrote {HISTORY_PATH} from {len(args.base)} releases")
    return Exit.OK


def _ledger(args, project: Project) -> int:
    from forktool.atomic import atomic_file
    from forktool.ledger import LEDGER_PATH, render_ledger

    text = render_ledger(project)
    # Like the other verbs' --out, a given path is the caller's (relative to the working directory).
    path = Path(args.out) if args.out else project.root / LEDGER_PATH
    shown = args.out or LEDGER_PATH
    if args.check:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return Exit.OK
        print(f"forktool ledger: {shown} is stale; run `python -m forktool ledger`", file=sys.stderr)
        return Exit.FINDINGS
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    print(f"wrote {shown}")
    return Exit.OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="forktool", description=__doc__)
    top.add_argument("--repo", default=None, help="fork checkout (default: the one holding forktool)")
    top.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    verbs = top.add_subparsers(dest="verb", required=True)
    build = verbs.add_parser("build", help="patched fork wheel from the pinned upstream wheel")
    build.add_argument("--out", default="dist")
    build.add_argument("--label", default=None, help="local version label (default: pyproject.toml)")
    build.add_argument("--pin", default=None,
                       help="another pin file (a test-only base, e.g. requirements/cpu-base.txt)")
    add_base_flags(build)
    build.add_argument("--json", action="store_true", help="print the wheel, its manifest and internals as JSON")
    build.set_defaults(run=_build)
    tree = verbs.add_parser("tree", help="patched source tree from the pinned sdist, for a CUDA build")
    tree.add_argument("--out", default="build/tree")
    tree.add_argument("--label", default=None)
    tree.set_defaults(run=_tree)
    export = verbs.add_parser("export-pr", help="the upstream PR series (upstream-prs/series.toml) as git am patches")
    export.add_argument("--out", default="build/pr")
    export.add_argument("--json", action="store_true", help="list the patches and notes as JSON")
    export.set_defaults(run=_export)
    check = verbs.add_parser("check", help="try every edit on another release")
    check.add_argument("--base", required=True, help="a requirement, e.g. vllm==0.29.0")
    check.add_argument("--json", action="store_true")
    check.set_defaults(run=_check)
    audit = verbs.add_parser("audit", help="EAGLE3 contract of every registered architecture")
    audit.add_argument("--tree", default="fork",
                       help="'fork' (pinned wheel + edits), 'upstream' (pinned wheel), or a source folder")
    audit.add_argument("--json", action="store_true")
    audit.add_argument("--verbose", action="store_true", help="list every architecture")
    audit.set_defaults(run=_audit)
    history = verbs.add_parser("arch-history", help="first release of each architecture, for vllm spec-check")
    history.add_argument("--base", action="append", required=True, help="a release to read, e.g. vllm==0.29.0")
    history.set_defaults(run=_history)
    ledger = verbs.add_parser("ledger", help="the one-page edit ledger (docs/edit-ledger.md) from edits/")
    ledger.add_argument("--out", default=None, help="where to write it (default: docs/edit-ledger.md)")
    ledger.add_argument("--check", action="store_true", help="exit 1 when the file differs from edits/")
    ledger.set_defaults(run=_ledger)
    return top


def main(argv: list[str] | None = None) -> int:
    """Exit codes (vllm/_fork/vocabulary.py): 0 ok, 1 findings, 2 bad input, 3 internal error."""
    args = parser().parse_args(argv)  # argparse itself exits 2 on a bad flag
    try:
        project = Project(Path(args.repo).resolve()) if args.repo else Project()
        if getattr(args, "pin", None):
            project = Project(project.root, args.pin)
        return int(args.run(args, project))
    except ForkError as exc:  # bad input (2) or findings (1): the message names the culprit
        for line in str(exc).splitlines():
            print(f"forktool {args.verb}: {line}", file=sys.stderr)
        return int(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - anything else is our own bug: one line, traceback on --debug
        if args.debug:
            traceback.print_exc()
        where = traceback.extract_tb(exc.__traceback__)[-1]
        first = (str(exc).splitlines() or [""])[0]
        print(f"forktool {args.verb}: internal error: {type(exc).__name__}: {first} "
              f"(at {Path(where.filename).name}:{where.lineno}; rerun with --debug for the traceback)",
              file=sys.stderr)
        return int(Exit.INTERNAL)
