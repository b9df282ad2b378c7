"""`audit`: pick the tree (fork, upstream or a folder), classify, print, exit 1 if a generation arch is broken."""

from __future__ import annotations

import zipfile
from pathlib import Path

from forktool.audit.classify import BROKEN, against_baseline, classify, is_generation
from forktool.audit.report import as_json, as_table
from forktool.audit.symbols import SourceTree
from forktool.contract_table import fork_source_tree
from forktool.errors import ForkError
from forktool.fetch import fetch
from forktool.project import Project, assemble
from forktool.vocabulary import Exit


def _folder_tree(folder: Path) -> SourceTree:
    if not (folder / "vllm/model_executor/models/registry.py").is_file():
        raise ForkError(f"--tree {folder}: no vllm/model_executor/models/registry.py under it")
    paths = {p.relative_to(folder).as_posix() for p in folder.rglob("*.py")}
    return SourceTree(lambda p: (folder / p).read_text(encoding="utf-8"), paths)


def fork_and_upstream(project: Project, wheel: zipfile.ZipFile) -> tuple[SourceTree, SourceTree]:
    """The pinned wheel's sources as upstream ships them and with the fork's edits and overlay."""
    names = set(wheel.namelist())

    def upstream_read(path: str) -> str:
        return wheel.read(path).decode("utf-8")

    fork = assemble(project, upstream_read, names)
    fork.require_buildable(names, "the pinned wheel")
    return fork_source_tree(fork.changed, fork.overlay, upstream_read, names), SourceTree(upstream_read, names)


def run_audit(project: Project, tree: str, as_machine: bool, verbose: bool) -> int:
    """Print the audit of `tree`; exit status 1 (findings) when a generation architecture is broken."""
    if tree in ("fork", "upstream"):
        path, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
        with zipfile.ZipFile(path) as wheel:
            fork_tree, upstream_tree = fork_and_upstream(project, wheel)
            upstream_rows = classify(upstream_tree)
            rows = upstream_rows if tree == "upstream" else against_baseline(classify(fork_tree), upstream_rows)
        name = f"{path.name} ({'with the fork' if tree == 'fork' else 'as released'})"
    else:
        rows, name = classify(_folder_tree(Path(tree))), tree
    code = Exit.FINDINGS if any(is_generation(r) and r.status in BROKEN for r in rows) else Exit.OK
    print(as_json(rows, name, int(code)) if as_machine else as_table(rows, name, verbose))
    return code
