"""Downloads go through pip into the cache; a file whose sha256 is not pinned is refused, loudly."""

from __future__ import annotations

import os
import shutil

import pytest

from fork_testing import UPSTREAM_VERSION, run_forktool
from forktool.errors import ForkError
from forktool.fetch import fetch, sha256_of


def _env(cache, **extra):
    env = dict(os.environ, FORKTOOL_CACHE=str(cache))
    env.update(extra)
    return env


def test_tampered_cached_wheel_is_refused(upstream_wheel, tmp_path):
    wheel, _ = upstream_wheel
    cache = tmp_path / "cache"
    (cache / "wheel").mkdir(parents=True)
    tampered = cache / "wheel" / wheel.name
    shutil.copyfile(wheel, tampered)
    with tampered.open("r+b") as handle:  # flip one byte in the middle of the archive
        handle.seek(tampered.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    dist = tmp_path / "dist"
    done = run_forktool("build", "--out", str(dist), env=_env(cache))
    assert done.returncode == 2  # bad input: the artifact cannot be had
    [line] = done.stderr.strip().splitlines()
    assert wheel.name in line and "is not pinned in requirements/upstream.txt" in line and "tampered" in line
    assert not dist.exists() or list(dist.iterdir()) == []


def test_no_network_and_no_cache_is_one_clear_line(tmp_path):
    dist = tmp_path / "dist"
    done = run_forktool("build", "--out", str(dist), env=_env(tmp_path / "empty", FORKTOOL_OFFLINE="1"))
    assert done.returncode == 2  # bad input: the artifact cannot be had
    [line] = done.stderr.strip().splitlines()
    assert f"cannot download the vllm=={UPSTREAM_VERSION} wheel with pip" in line and "no copy is cached in" in line
    assert "Traceback" not in done.stderr
    assert not dist.exists()


def test_download_is_verified_before_it_enters_the_cache(project, upstream_wheel, tmp_path, monkeypatch):
    # pip "downloads" from a local folder (PIP_FIND_LINKS, --no-index): the real download path, offline.
    wheel, digest = upstream_wheel
    links = tmp_path / "links"
    links.mkdir()
    shutil.copyfile(wheel, links / wheel.name)
    cache = tmp_path / "cache"
    monkeypatch.setenv("FORKTOOL_CACHE", str(cache))
    monkeypatch.setenv("FORKTOOL_OFFLINE", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    with pytest.raises(ForkError, match="fresh download"):
        fetch("vllm", UPSTREAM_VERSION, "wheel", frozenset({"0" * 64}))
    assert [p.name for p in (cache / "wheel").iterdir()] == []  # nothing unverified is kept
    path, got = fetch("vllm", UPSTREAM_VERSION, "wheel", project.pin.hashes)
    assert (path.parent, got, sha256_of(path)) == (cache / "wheel", digest, digest)
