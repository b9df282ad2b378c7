"""`audit`: pick the tree (fork, upstream or a folder), classify, print, exit 1 if a generation arch is broken.

On the fork over the pinned release, rows the oracles built (tools/oracles/verdicts.json) take their verdict."""

from __future__ import annotations

import zipfile
from pathlib import Path

from forktool import contract_table
from forktool.assembly import assemble
from forktool.audit import oracle
from forktool.audit.classify import BROKEN, against_baseline, classify, is_generation
from forktool.audit.report import as_json, as_table
from forktool.errors import ForkError
from forktool.fetch import fetch
from forktool.project import Project
from forktool.sourcetree import SourceTree
from forktool.vocabulary import Exit


def _folder_tree(folder: Path) -> SourceTree:
    if not (folder / "vllm/model_executor/models/registry.py").is_file():
        raise ForkError(f"--tree {folder}: no vllm/model_executor/models/registry.py under it")
    paths = {p.relative_to(folder).as_posix() for p in folder.rglob("*.py")}
    return SourceTree(lambda p: (folder / p).read_text(encoding="utf-8"), paths)


def upstream_tree(wheel: zipfile.ZipFile) -> SourceTree:
    """The pinned wheel's sources as released."""
    return SourceTree.from_zip(wheel)


def fork_and_upstream(project: Project, wheel: zipfile.ZipFile, fork=None) -> tuple[SourceTree, SourceTree]:
    """The pinned wheel's sources with the fork's edits and overlay (`fork` if already assembled) and as released."""
    upstream = upstream_tree(wheel)
    if fork is None:
        fork = assemble(project, upstream)
    fork.require_buildable("the pinned wheel")
    return fork.tree(), upstream


def run_audit(project: Project, tree: str, as_machine: bool, verbose: bool) -> int:
    """Print the audit of `tree`; exit status 1 (findings) when a generation architecture is broken."""
    if tree in ("fork", "upstream"):
        path, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
        with zipfile.ZipFile(path) as wheel:
            if tree == "upstream":  # the fork is not assembled when only the release is audited
                rows = classify(upstream_tree(wheel))
            else:
                fork, upstream = fork_and_upstream(project, wheel)
                rows = against_baseline(classify(fork), classify(upstream))
                base = f"{project.pin.name} {project.pin.version}"
                rows = oracle.apply(rows, contract_table.oracle_results(), base)
        name = f"{path.name} ({'with the fork' if tree == 'fork' else 'as released'})"
    else:
        rows, name = classify(_folder_tree(Path(tree))), tree
    code = Exit.FINDINGS if any(is_generation(r) and r.status in BROKEN for r in rows) else Exit.OK
    print(as_json(rows, name, int(code)) if as_machine else as_table(rows, name, verbose))
    return code
