"""Applied edits kept per upstream file: the same engine, file text and edits always give the same result.

A build, a tree, an export and a check each apply every edit again (about 20 CPU seconds, mostly LibCST
visits); the suite does that a few dozen times. The key covers everything the result depends on: the
engine's own code (apply.py and every op), the LibCST version, the upstream file's text and each edit's
operation, parameters and expected count, in order. FORKTOOL_APPLY_CACHE=0 turns it off.
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
from forktool.specs import Edit
from forktool.vocabulary import EditStatus

ENGINE_FILES = ("apply.py", "applycache.py", "ops/*.py")


@cache
def _engine_digest() -> str:
    """The engine's code and LibCST's version: a change to either makes every entry stale."""
    digest = hashlib.sha256(version("libcst").encode())
    root = Path(__file__).parent
    for path in sorted(p for pattern in ENGINE_FILES for p in root.glob(pattern)):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def enabled() -> bool:
    return os.environ.get("FORKTOOL_APPLY_CACHE", "1") != "0"


def key(source: str, edits: list[Edit]) -> str:
    """What one file's result depends on, hashed."""
    what = [_engine_digest(), source, [[e.op, e.params, e.expect] for e in edits]]
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def _path(entry: str) -> Path:
    return cache_root() / "applied" / entry[:2] / f"{entry}.json"


def load(entry: str) -> tuple[str, list[tuple[EditStatus, str]]] | None:
    """The edited text and each edit's (status, detail), or None when this file was never applied so."""
    path = _path(entry)
    if not enabled() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return data["code"], [(EditStatus(status), detail) for status, detail in data["results"]]
    except (OSError, ValueError, KeyError, TypeError):  # a damaged entry is applied again and rewritten
        return None


def store(entry: str, code: str, results: list[tuple[EditStatus, str]]) -> None:
    """Written whole or not at all (a temp file renamed into place)."""
    if not enabled():
        return
    path = _path(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
        json.dump({"code": code, "results": [[str(s), d] for s, d in results]}, handle)
    os.replace(handle.name, path)
