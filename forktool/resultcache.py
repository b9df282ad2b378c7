"""Results of the build's pure, slow steps kept on disk: the same inputs always give the same result.

A build, a tree, an export and a check each apply every edit (≈ 20 CPU s of LibCST visits), format the edited
files with ruff and classify the fork for its contract table (≈ 15 s); a developer's rebuild and the test suite
repeat that with mostly the same inputs. Each step's key covers everything its result depends on, its own
code included (`code_digest`), so a stale entry cannot be read. Entries live in the download cache
(`FORKTOOL_CACHE`, `results/<kind>/`); FORKTOOL_RESULT_CACHE=0 computes everything afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from importlib.metadata import version
from pathlib import Path

from forktool.fetch import cache_root

ENV = "FORKTOOL_RESULT_CACHE"
_FORKTOOL = Path(__file__).parent


@cache
def code_digest(*patterns: str, packages: tuple[str, ...] = ()) -> str:
    """sha256 of the forktool files matching `patterns` (relative to forktool/) and the installed
    versions of `packages`: a change to either makes every entry keyed by it stale."""
    digest = hashlib.sha256(json.dumps([version(name) for name in packages]).encode())
    for path in sorted({p for pattern in patterns for p in _FORKTOOL.glob(pattern)}):
        digest.update(path.relative_to(_FORKTOOL).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(*parts) -> str:
    """One key from JSON-able parts."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def _path(kind: str, entry: str) -> Path:
    return cache_root() / "results" / kind / entry[:2] / f"{entry}.json"


def load(kind: str, entry: str):
    """The stored JSON value, or None when there is none (or it is damaged: it is then computed again)."""
    path = _path(kind, entry)
    if not enabled() or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def store(kind: str, entry: str, value) -> None:
    """Written whole or not at all: a temp file renamed into place (not atomic.atomic_file, whose fixed temp
    name two test workers storing the same entry at once would share)."""
    if not enabled():
        return
    path = _path(kind, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(value, out)
        os.replace(partial, path)
    finally:
        Path(partial).unlink(missing_ok=True)
