"""Where the fork's own inputs live in this repository: edits, overlay, pin, version label, PR series."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from forktool import overlay as overlay_mod
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
        return overlay_mod.collect(self.overlay_root) if self.overlay_root.is_dir() else {}
