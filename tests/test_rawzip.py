"""Copying members compressed gives the very bytes that inflating and deflating them again (the old build) gave."""

from __future__ import annotations

import copy
import zipfile

import pytest

from forktool.fetch import sha256_of
from forktool.rawzip import compressed_bytes, write_compressed

SMALL = 1 << 20  # deflating the big kernels again is what the raw copy saves; the sample leaves them out


def _sample(wheel: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """Every 25th small member of the real wheel, its dist-info, and one compiled kernel."""
    infos = wheel.infolist()
    small = [i for i in infos if i.file_size < SMALL]
    kernel = min((i for i in infos if i.filename.endswith(".so")), key=lambda i: i.file_size)
    return [*small[::25], kernel, *(i for i in infos if ".dist-info/" in i.filename)]


def test_raw_copy_of_the_real_wheel_is_byte_identical_to_recompressing(upstream_wheel, tmp_path):
    with zipfile.ZipFile(upstream_wheel[0]) as upstream:
        sample = _sample(upstream)
        assert len(sample) > 200
        with zipfile.ZipFile(tmp_path / "old.zip", "w") as old, zipfile.ZipFile(tmp_path / "new.zip", "w") as new:
            for index, info in enumerate(sample):
                old.writestr(copy.copy(info), upstream.read(info))
                write_compressed(new, info, compressed_bytes(upstream, info))
                if index % 50 == 0:  # new files written between copied ones, as the build adds the overlay
                    for archive in (old, new):
                        archive.writestr(zipfile.ZipInfo(f"added/{index}.py", (1980, 1, 1, 0, 0, 0)), b"x = 1\n")
    assert sha256_of(tmp_path / "new.zip") == sha256_of(tmp_path / "old.zip")
    with zipfile.ZipFile(tmp_path / "new.zip") as new:
        assert new.testzip() is None


def test_raw_copy_keeps_dates_and_deflate_of_a_small_archive(tmp_path):
    """A deflated archive made here (one member with its own date), copied both ways: same digest."""
    source = tmp_path / "source.zip"
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pkg/a.py", "print('a')\n" * 200)
        dated = zipfile.ZipInfo("pkg/b.bin", (2020, 5, 17, 1, 2, 4))
        dated.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(dated, bytes(range(256)) * 40)
    with zipfile.ZipFile(source) as upstream:
        for info in upstream.infolist():
            assert compressed_bytes(upstream, info) != upstream.read(info)  # really compressed, not stored
        for name in ("old", "new"):
            with zipfile.ZipFile(tmp_path / f"{name}.zip", "w") as out:
                for info in upstream.infolist():
                    if name == "old":
                        out.writestr(copy.copy(info), upstream.read(info))
                    else:
                        write_compressed(out, info, compressed_bytes(upstream, info))
    assert sha256_of(tmp_path / "new.zip") == sha256_of(tmp_path / "old.zip")


def test_a_member_compressed_with_something_else_is_refused(tmp_path):
    info = zipfile.ZipInfo("pkg/a.py")
    info.compress_type = zipfile.ZIP_LZMA
    with zipfile.ZipFile(tmp_path / "out.zip", "w") as out, pytest.raises(zipfile.BadZipFile, match="pkg/a.py"):
        write_compressed(out, info, b"")
