"""Write the fork tree: the pinned sdist unpacked with the same edits and overlay, ready for a CMake/CUDA build."""

from __future__ import annotations

import tarfile
from contextlib import contextmanager
from pathlib import Path

from forktool.atomic import atomic_dir
from forktool.errors import ForkError
from forktool.pins import Pin
from forktool.sourcetree import SourceTree

# vLLM's precompiled build route re-extracts these from the upstream wheel, which would undo an edit.
_REEXTRACTED = ("vllm/vllm_flash_attn/", "vllm/third_party/")


def _strip_top(archive: tarfile.TarFile, prefix: str):
    """Members under the sdist's top folder, renamed relative to it (the tree is that folder)."""
    for member in archive.getmembers():
        if not member.name.startswith(prefix):
            continue
        member.name = member.name[len(prefix):]
        if member.islnk() and member.linkname.startswith(prefix):
            member.linkname = member.linkname[len(prefix):]
        yield member


@contextmanager
def unpacked_sdist(sdist: Path, pin: Pin, final: Path):
    """Unpack `sdist` beside `final` and yield (that folder, its files as a tree); it replaces `final` (an older
    tree) only if the block succeeds."""
    with atomic_dir(final) as top:
        with tarfile.open(sdist) as archive:
            archive.extractall(top, members=_strip_top(archive, f"{pin.name}-{pin.version}/"), filter="data")
        if not (top / "setup.py").is_file():
            raise ForkError(f"{sdist.name}: no setup.py under {pin.name}-{pin.version}/; is this the pinned sdist?")
        paths = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
        yield top, SourceTree(lambda p: (top / p).read_text(encoding="utf-8"), paths)


def refuse_reextracted(changed: dict[str, str]) -> None:
    """A tree cannot carry an edit that vLLM's precompiled build route would undo."""
    for target in changed:
        if target.startswith(_REEXTRACTED):
            raise ForkError(f"{target}: edited, but VLLM_USE_PRECOMPILED builds re-extract it from "
                            "the upstream wheel; this tree cannot carry that edit")


def write_tree(top: Path, changed: dict[str, str], added: dict[str, bytes]) -> None:
    """Write the edited and the added files into the unpacked tree."""
    files = {path: text.encode("utf-8") for path, text in changed.items()}
    files.update(added)
    for path, data in files.items():
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_bytes(data)
