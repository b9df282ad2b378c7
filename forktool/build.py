"""`build` and `tree`: the fork from the pinned upstream artifact, in the same steps for the wheel and the tree.

1. fetch the pinned wheel (sdist for a tree), its sha256 checked     forktool/fetch.py
2. resolve the declared upstream internals in it                     forktool/internals.py
3. assemble the fork: every edit applied and formatted, the overlay  forktool/assembly.py
4. stop at broken edits and internals, or a shadowed overlay file
5. classify the fork for the contract table spec-check reads         forktool/contract_table.py
6. render the provenance manifest                                    forktool/manifest.py
7. write the artifact atomically                                     forktool/wheelbuild.py, forktool/tree.py
"""

from __future__ import annotations

import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from forktool.assembly import Assembly, assemble
from forktool.contract_table import CONTRACT_PATH, contract_module
from forktool.errors import ForkError
from forktool.fetch import fetch
from forktool.internals import InternalResult, check_internals, load_internals
from forktool.manifest import MANIFEST_PATH, manifest, render
from forktool.options import BuildOptions
from forktool.pins import Pin
from forktool.project import Project
from forktool.sourcetree import SourceTree
from forktool.tree import refuse_reextracted, unpacked_sdist, write_tree
from forktool.vocabulary import EditStatus, InternalStatus
from forktool.wheelbuild import require_wheel, write_wheel


@dataclass(frozen=True)
class Built:
    """What a build wrote, and each declared internal as the base has it."""

    path: Path
    internals: list[InternalResult]


def build(project: Project, options: BuildOptions = BuildOptions()) -> Built:
    """The fork wheel in options.out: upstream's wheel with the fork applied (nothing half-written on failure)."""
    pin, label = project.pin, options.label or project.label
    wheel, digest = fetch(pin.name, pin.version, "wheel", pin.hashes)
    with zipfile.ZipFile(wheel) as zin:
        fork, internals = _checked_fork(project, SourceTree.from_zip(zin), wheel.name, options)
        require_wheel(zin, wheel.name, pin)
        added = _new_files(fork, pin, label, wheel.name, digest)
        path = write_wheel(zin, wheel.name, pin, label, fork.changed, added, options.out, options.recompress)
    for result in internals:  # only a test-only base (--allow-absent) gets here with a broken one
        if result.status == InternalStatus.BROKEN:
            print(result.line(), file=sys.stderr)
    return Built(path, internals)


def build_tree(project: Project, options: BuildOptions = BuildOptions()) -> Built:
    """The fork tree in options.out/<name>-<version>+<label>/: the pinned sdist with the fork applied, replacing
    an older tree only once complete."""
    pin, label = project.pin, options.label or project.label
    sdist, digest = fetch(pin.name, pin.version, "sdist", pin.hashes)
    final = options.out / f"{pin.name}-{pin.version}+{label}"
    with unpacked_sdist(sdist, pin, final) as (top, upstream):
        fork, internals = _checked_fork(project, upstream, sdist.name, options)
        refuse_reextracted(fork.changed)
        write_tree(top, fork.changed, _new_files(fork, pin, label, sdist.name, digest))
    return Built(final, internals)


def _checked_fork(project: Project, upstream: SourceTree, artifact: str,
                  options: BuildOptions) -> tuple[Assembly, list[InternalResult]]:
    """Steps 2-4. Broken internals are listed after the broken edits, so one run names every culprit; a test-only
    base (allow_absent) builds without them and prints them at the end, as it prints absent and skipped edits."""
    # On a tree of its own: the modules it parses are freed before the edits are applied (kept alive, they would
    # slow down every later garbage collection of the build by seconds).
    internals = check_internals(load_internals(project.root), SourceTree(upstream.read, upstream.paths))
    fork = assemble(project, upstream, options)
    broken = [] if options.allow_absent else [r.line() for r in internals if r.status == InternalStatus.BROKEN]
    fork.require_buildable(artifact, broken)
    for result in fork.results:
        if result.status in (EditStatus.ABSENT, EditStatus.SKIPPED):  # allowed, but never silent
            print(result.line(), file=sys.stderr)
    return fork, internals


def _new_files(fork: Assembly, pin: Pin, label: str, artifact: str, sha: str) -> dict[str, bytes]:
    """Steps 5-6: the files the fork adds to the upstream tree: overlay, manifest, contract table."""
    for path in (MANIFEST_PATH, CONTRACT_PATH):
        if path in fork.overlay:
            raise ForkError(f"{path}: generated at build time; remove it from the overlay")
    version = f"{pin.version}+{label}"
    upstream = {"name": pin.name, "version": pin.version, "artifact": artifact, "sha256": sha}
    files = dict(fork.overlay)
    files[MANIFEST_PATH] = render(manifest(version, upstream, fork.results, fork.overlay))
    files[CONTRACT_PATH] = contract_module(fork, sha, f"{pin.name} {version}")
    return files
