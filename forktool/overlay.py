"""The overlay: new files at their future path inside vLLM, never a replacement of an upstream file."""

from __future__ import annotations

from pathlib import Path

from forktool.errors import FindingsError

# Build byproducts of running the overlay in place; they are not part of the fork.
_IGNORED_DIRS = {"__pycache__"}
_IGNORED_SUFFIXES = {".pyc", ".pyo"}


def collect(overlay_root: Path) -> dict[str, bytes]:
    """Overlay files keyed by their path inside the package tree (`vllm/...`), in sorted order."""
    files = {}
    base = overlay_root.parent
    for path in sorted(overlay_root.rglob("*")):
        if path.is_dir() or _IGNORED_DIRS & set(path.relative_to(base).parts):
            continue
        if path.suffix in _IGNORED_SUFFIXES:
            continue
        files[path.relative_to(base).as_posix()] = path.read_bytes()
    return files


def shadowed(overlay: dict[str, bytes], upstream_paths: set[str]) -> list[str]:
    """Overlay paths that already exist upstream."""
    return [path for path in overlay if path in upstream_paths]


def require_new(overlay: dict[str, bytes], upstream_paths: set[str], upstream_name: str) -> None:
    """Refuse overlay files that would replace an upstream file (a finding on this base, exit 1)."""
    clashes = shadowed(overlay, upstream_paths)
    if clashes:
        raise FindingsError("\n".join(
            f"{path}: overlay file already exists in {upstream_name}; overlays add new files only — "
            "express the change as an edit under edits/ or rename the file" for path in clashes))
