"""Outputs appear whole or not at all: write beside the destination, then rename into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_file(final: Path):
    """Yield a temporary path next to `final`; it becomes `final` only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.parent / f".{final.name}.partial"
    try:
        yield partial
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)


@contextmanager
def atomic_dir(final: Path):
    """Yield a temporary directory next to `final`; it replaces `final` only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.partial-"))
    try:
        yield partial
        if final.exists():
            shutil.rmtree(final)
        os.replace(partial, final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
