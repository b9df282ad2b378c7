"""Command line: python -m forktool {build,tree,export-pr,check,audit}."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forktool.errors import ForkError
from forktool.fetch import fetch
from forktool.project import Project


def _build(args, project: Project) -> int:
    from forktool.wheelbuild import build_wheel

    wheel, digest = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    out = build_wheel(project, wheel, digest, Path(args.out), args.label or project.label,
                      args.allow_absent, frozenset(args.skip))
    print(out)
    return 0


def _tree(args, project: Project) -> int:
    from forktool.tree import build_tree

    sdist, digest = fetch(project.pin.name, project.pin.version, "sdist", project.pin.hashes)
    print(build_tree(project, sdist, digest, Path(args.out), args.label or project.label))
    return 0


def _export(args, project: Project) -> int:
    from forktool.export import export_series

    wheel, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    notes: list[str] = []
    for patch in export_series(project, wheel, Path(args.out), notes):
        print(patch)
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def _check(args, project: Project) -> int:
    from forktool.check import check_base

    return check_base(project, args.base)


def _audit(args, project: Project) -> int:
    from forktool.audit.run import run_audit

    return run_audit(project, args.tree, args.json, args.verbose)


def _history(args, project: Project) -> int:
    from forktool.history import HISTORY_PATH, write_history

    write_history(args.base, project.root / HISTORY_PATH)
    print(f"wrote {HISTORY_PATH} from {len(args.base)} releases")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="forktool", description=__doc__)
    top.add_argument("--repo", default=None, help="fork checkout (default: the one holding forktool)")
    verbs = top.add_subparsers(dest="verb", required=True)
    build = verbs.add_parser("build", help="patched fork wheel from the pinned upstream wheel")
    build.add_argument("--out", default="dist")
    build.add_argument("--label", default=None, help="local version label (default: pyproject.toml)")
    build.add_argument("--pin", default=None,
                       help="another pin file (a test-only base, e.g. requirements/cpu-base.txt)")
    build.add_argument("--allow-absent", action="store_true",
                       help="record edits whose file this base does not have yet as absent instead of failing")
    build.add_argument("--skip", action="append", default=[], metavar="SPEC:ID",
                       help="do not try this edit on this base (repeatable); it is listed as skipped")
    build.set_defaults(run=_build)
    tree = verbs.add_parser("tree", help="patched source tree from the pinned sdist, for a CUDA build")
    tree.add_argument("--out", default="build/tree")
    tree.add_argument("--label", default=None)
    tree.set_defaults(run=_tree)
    export = verbs.add_parser("export-pr", help="one patch per spec file against upstream")
    export.add_argument("--out", default="build/pr")
    export.set_defaults(run=_export)
    check = verbs.add_parser("check", help="try every edit on another release")
    check.add_argument("--base", required=True, help="a requirement, e.g. vllm==0.29.0")
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
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    project = Project(Path(args.repo).resolve()) if args.repo else Project()
    if getattr(args, "pin", None):
        project = Project(project.root, args.pin)
    try:
        return args.run(args, project)
    except ForkError as exc:
        for line in str(exc).splitlines():
            print(f"forktool {args.verb}: {line}", file=sys.stderr)
        return 1
