"""`build`: the upstream wheel, with edits applied, overlay added, version stamped and RECORD rewritten."""

from __future__ import annotations

import base64
import copy
import csv
import hashlib
import io
import os
import re
import zipfile
from pathlib import Path

from forktool.apply import require_no_broken
from forktool.errors import ForkError
from forktool.manifest import MANIFEST_PATH, manifest, render
from forktool.overlay import require_new
from forktool.project import Project, assemble

_NEW_FILE_DATE = (1980, 1, 1, 0, 0, 0)  # fixed, so that rebuilding gives the same bytes


def _stamp(text: str, pattern: str, replacement: str, where: str) -> str:
    """Replace exactly one match of `pattern` in `text`, or stop naming `where`."""
    result, count = re.subn(pattern, replacement, text, flags=re.M)
    if count != 1:
        raise ForkError(f"{where}: expected one match of {pattern!r} to stamp the fork version, found {count}")
    return result


def stamp_version_module(text: str, upstream: str, label: str) -> str:
    """vllm/_version.py with `upstream` replaced by `upstream+label` in the version and version tuple."""
    text = _stamp(text, rf"'{re.escape(upstream)}'", f"'{upstream}+{label}'", "vllm/_version.py")
    parts = ", ".join(upstream.split("."))
    return _stamp(text, rf"\({re.escape(parts)}\)", f"({parts}, '{label}')", "vllm/_version.py")


def record_line(path: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [path, f"sha256={digest}", str(len(data))]


def _new_info(path: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(path, date_time=_NEW_FILE_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o100644 << 16
    info.create_system = 3
    return info


def _write(zout: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes, record: list) -> None:
    zout.writestr(info, data)
    record.append(record_line(info.filename, data))


def build_wheel(project: Project, upstream_wheel: Path, upstream_sha: str, out_dir: Path, label: str) -> Path:
    """Write dist/vllm-<upstream>+<label>-....whl atomically; return its path."""
    pin = project.pin
    version = f"{pin.version}+{label}"
    with zipfile.ZipFile(upstream_wheel) as zin:
        names = zin.namelist()
        old_info = f"{pin.name}-{pin.version}.dist-info/"
        new_info = f"{pin.name}-{version}.dist-info/"
        if f"{old_info}METADATA" not in names:
            raise ForkError(f"{upstream_wheel.name}: no {old_info}METADATA; is this the pinned vllm wheel?")
        fork = assemble(project, lambda p: zin.read(p).decode("utf-8"), set(names))
        require_no_broken(fork.results)
        require_new(fork.overlay, set(names), upstream_wheel.name)
        upstream = {"name": pin.name, "version": pin.version, "artifact": upstream_wheel.name,
                    "sha256": upstream_sha}
        added = dict(fork.overlay)
        added[MANIFEST_PATH] = render(manifest(version, upstream, fork.results, fork.overlay))

        final = out_dir / upstream_wheel.name.replace(f"-{pin.version}-", f"-{version}-", 1)
        out_dir.mkdir(parents=True, exist_ok=True)
        partial = out_dir / f".{final.name}.partial"
        try:
            with zipfile.ZipFile(partial, "w") as zout:
                record: list[list[str]] = []
                for info in zin.infolist():
                    if info.filename.startswith(old_info):
                        continue  # dist-info goes last, renamed
                    data = zin.read(info)
                    if info.filename in fork.changed:
                        data = fork.changed[info.filename].encode("utf-8")
                    elif info.filename == "vllm/_version.py":
                        data = stamp_version_module(data.decode(), pin.version, label).encode()
                    _write(zout, copy.copy(info), data, record)
                for path, data in added.items():
                    _write(zout, _new_info(path), data, record)
                for info in zin.infolist():
                    name = info.filename
                    if not name.startswith(old_info) or name == f"{old_info}RECORD":
                        continue
                    data = zin.read(info)
                    if name == f"{old_info}METADATA":
                        data = _stamp(data.decode(), rf"^Version: {re.escape(pin.version)}$",
                                      f"Version: {version}", f"{old_info}METADATA").encode()
                    renamed = copy.copy(info)
                    renamed.filename = new_info + name[len(old_info):]
                    _write(zout, renamed, data, record)
                record.append([f"{new_info}RECORD", "", ""])
                text = io.StringIO()
                csv.writer(text, lineterminator="\n").writerows(record)
                zout.writestr(_new_info(f"{new_info}RECORD"), text.getvalue().encode())
            os.replace(partial, final)
        finally:
            partial.unlink(missing_ok=True)
    return final
