"""Where the fork's own inputs live in this repository, and how they combine with an upstream tree."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from forktool import overlay as overlay_mod
from forktool.apply import EditResult, apply_edits, require_no_broken
from forktool.contract_table import CONTRACT_PATH, contract_module
from forktool.errors import ForkError
from forktool.format import format_sources
from forktool.manifest import MANIFEST_PATH, manifest, render
from forktool.pins import Pin, load_pin
from forktool.series import PullRequest, check_series, load_series
from forktool.specs import Edit, load_all

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Project:
    """The fork checkout: edits/, the vllm/ overlay, the pin and the version label."""

    root: Path = REPO_ROOT
    pin_file: str = "requirements/upstream.txt"  # another pin (a test-only base) via build --pin

    @property
    def edits_root(self) -> Path:
        return self.root / "edits"

    @property
    def overlay_root(self) -> Path:
        return self.root / "vllm"

    @cached_property
    def pin(self) -> Pin:
        return load_pin(self.root / self.pin_file)

    @cached_property
    def label(self) -> str:
        """Local version label of fork builds, from [tool.forktool] in pyproject.toml."""
        config = tomllib.loads((self.root / "pyproject.toml").read_text(encoding="utf-8"))
        return config["tool"]["forktool"]["label"]

    def edits(self) -> list[Edit]:
        """Every edit, checked against the PR series (a spec's pr and the series' entries must match)."""
        edits = load_all(self.edits_root, self.root) if self.edits_root.is_dir() else []
        check_series(self.series(), edits)
        return edits

    def series(self) -> list[PullRequest]:
        return load_series(self.root)

    def overlay(self) -> dict[str, bytes]:
        files = overlay_mod.collect(self.overlay_root) if self.overlay_root.is_dir() else {}
        for generated in (MANIFEST_PATH, CONTRACT_PATH):
            if generated in files:
                raise ForkError(f"{generated}: generated at build time; remove it from the overlay")
        return files


@dataclass(frozen=True)
class Assembly:
    """The fork's changes over one upstream tree: edited files, per-edit results and overlay files."""

    changed: dict[str, str]
    results: list[EditResult]
    overlay: dict[str, bytes]

    def require_buildable(self, upstream_paths: set[str], upstream_name: str) -> None:
        """Stop on any broken edit or any overlay file that would replace an upstream file."""
        require_no_broken(self.results)
        overlay_mod.require_new(self.overlay, upstream_paths, upstream_name)

    def new_files(self, version: str, upstream: dict, read, paths: set[str]) -> dict[str, bytes]:
        """Files the fork adds to the upstream tree `read(path)`: overlay, provenance manifest, contract table."""
        files = dict(self.overlay)
        files[MANIFEST_PATH] = render(manifest(version, upstream, self.results, self.overlay))
        files[CONTRACT_PATH] = contract_module(self.changed, self.overlay, read, paths, upstream,
                                               f"{upstream['name']} {version}")
        return files


def assemble(project: Project, read, paths: set[str], allow_absent: bool = False,
             skip: frozenset[str] = frozenset(), formatted: bool = True) -> Assembly:
    """Apply every edit to the upstream files `read(path)` among `paths`; nothing is checked for breakage.

    For an older, test-only base: allow_absent records an edit whose file the base does not have yet as
    `absent` instead of broken, and `skip` names edits (`<spec file>:<id>`) not to try there (`skipped`).
    Both are printed by the build and listed in the manifest. Edited files are formatted with upstream's
    ruff (forktool/format.py) unless `formatted` is off (check and internals only read statuses and names)."""
    edits = project.edits()
    unknown = sorted(skip - {f"{e.spec_file}:{e.id}" for e in edits})
    if unknown:
        raise ForkError(f"--skip {unknown[0]}: no such edit; name it as <spec file>:<edit id>")
    tried = [e for e in edits if f"{e.spec_file}:{e.id}" not in skip]
    sources = {e.target: read(e.target) for e in tried if e.target in paths}
    changed, results = apply_edits(sources, tried, "absent" if allow_absent else "broken")
    if formatted:
        [changed] = format_sources(project.root, [changed], paths)
    by_edit = {id(r.edit): r for r in results}
    ordered = [by_edit.get(id(e)) or EditResult(e, "skipped", "not tried on this base (--skip)") for e in edits]
    return Assembly(changed, ordered, project.overlay())
