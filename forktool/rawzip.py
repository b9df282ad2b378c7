"""Copy a zip member's compressed bytes from one archive to another without inflating and deflating it again."""

from __future__ import annotations

import copy
import struct
import zipfile

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zipfile's own local file header layout (30 bytes)
_LOCAL_MAGIC = b"PK\x03\x04"


def compressed_bytes(zin: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's data exactly as stored in `zin` (still compressed), read past its local header."""
    zin.fp.seek(info.header_offset)
    header = zin.fp.read(_LOCAL_HEADER.size)
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != _LOCAL_MAGIC:
        raise zipfile.BadZipFile(f"{info.filename}: no local file header at offset {info.header_offset}")
    name_length, extra_length = fields[-2], fields[-1]
    zin.fp.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
    data = zin.fp.read(info.compress_size)
    if len(data) != info.compress_size:
        raise zipfile.BadZipFile(f"{info.filename}: truncated member data")
    return data


def write_compressed(zout: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes) -> None:
    """Append a member whose `data` is already compressed as `info` says, with the header `writestr` would write."""
    # zipfile has no public call for this. The steps mirror ZipFile.writestr on a seekable file (flags cleared,
    # zip64 decided from the uncompressed size, entry listed for the central directory), so the archive is
    # byte-identical to one written by writestr whenever deflate gives the same bytes (tests/test_rawzip.py).
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise zipfile.BadZipFile(f"{info.filename}: compression {info.compress_type} is not copied raw")
    clone = copy.copy(info)
    clone.flag_bits = 0
    clone.compress_size = len(data)
    if not clone.external_attr:
        clone.external_attr = 0o600 << 16
    zip64 = clone.file_size * 1.05 > zipfile.ZIP64_LIMIT
    zout.fp.seek(zout.start_dir)
    clone.header_offset = zout.fp.tell()
    zout._writecheck(clone)
    zout._didModify = True
    zout.fp.write(clone.FileHeader(zip64))
    zout.fp.write(data)
    zout.filelist.append(clone)
    zout.NameToInfo[clone.filename] = clone
    zout.start_dir = zout.fp.tell()
