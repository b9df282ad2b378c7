"""`tree`: the pinned sdist unpacked with the same edits and overlay, ready for a full CMake/CUDA build."""

from __future__ import annotations

import tarfile
from pathlib import Path

from forktool.atomic import atomic_dir
from forktool.errors import ForkError
from forktool.project import Project, assemble

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


def build_tree(project: Project, sdist: Path, sdist_sha: str, out_dir: Path, label: str) -> Path:
    """Write out_dir/vllm-<version>+<label>/ atomically (replacing an older one); return its path."""
    pin = project.pin
    version = f"{pin.version}+{label}"
    final = out_dir / f"{pin.name}-{version}"
    with atomic_dir(final) as tmp:
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, members=_strip_top(archive, f"{pin.name}-{pin.version}/"), filter="data")
        top = tmp
        if not (top / "setup.py").is_file():
            raise ForkError(f"{sdist.name}: no setup.py under {pin.name}-{pin.version}/; is this the pinned sdist?")
        paths = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
        fork = assemble(project, lambda p: (top / p).read_text(encoding="utf-8"), paths)
        fork.require_buildable(paths, sdist.name)
        for target in fork.changed:
            if target.startswith(_REEXTRACTED):
                raise ForkError(f"{target}: edited, but VLLM_USE_PRECOMPILED builds re-extract it from "
                                "the upstream wheel; this tree cannot carry that edit")
        files = {path: text.encode("utf-8") for path, text in fork.changed.items()}
        files.update(fork.new_files(version, {"name": pin.name, "version": pin.version,
                                              "artifact": sdist.name, "sha256": sdist_sha},
                                    lambda p: (top / p).read_text(encoding="utf-8"), paths))
        for path, data in files.items():
            (top / path).parent.mkdir(parents=True, exist_ok=True)
            (top / path).write_bytes(data)
    return final
