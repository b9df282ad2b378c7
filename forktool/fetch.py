"""Fetch upstream wheels and sdists through pip into a cache, refusing any file whose sha256 is not pinned."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from forktool.errors import ForkError

PLATFORM = "manylinux_2_28_x86_64"
SDIST_HINT = ("run this from an environment with vLLM's build requirements "
              "(torch==2.14.0, setuptools-rust, setuptools-scm), e.g. the test environment .venv-test")


def cache_root() -> Path:
    """Where downloads are kept: $FORKTOOL_CACHE, else ~/.cache/forktool."""
    return Path(os.environ.get("FORKTOOL_CACHE") or Path.home() / ".cache" / "forktool")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pattern(name: str, version: str, kind: str) -> str:
    stem = f"{name.replace('-', '_')}-{version}"
    return f"{stem}-*-{PLATFORM}.whl" if kind == "wheel" else f"{stem}.tar.gz"


def _verify(path: Path, hashes: frozenset[str] | None, origin: str) -> str:
    digest = sha256_of(path)
    if hashes is not None and digest not in hashes:
        raise ForkError(f"{path}: sha256 {digest} is not pinned in requirements/upstream.txt "
                        f"({origin}); the file was tampered with or replaced: delete it and rerun")
    return digest


def _pip_download(requirement: str, kind: str, dest: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "-d", str(dest)]
    if kind == "wheel":
        command += ["--only-binary=:all:", "--platform", PLATFORM, "--python-version", "3.12"]
    else:
        command += ["--no-binary=:all:", "--no-build-isolation"]
    if os.environ.get("FORKTOOL_OFFLINE"):
        command.append("--no-index")
    done = subprocess.run(command + [requirement], capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        last = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")
        hint = f"; {SDIST_HINT}" if kind == "sdist" and "metadata" in done.stderr else ""
        raise ForkError(f"cannot download the {requirement} {kind} with pip ({last}) and no copy is "
                        f"cached in {dest.parent}: connect to PyPI or place the file there{hint}")


def fetch(name: str, version: str, kind: str, hashes: frozenset[str] | None) -> tuple[Path, str]:
    """Path and sha256 of the `kind` ('wheel' or 'sdist') of name==version, downloading if needed."""
    folder = cache_root() / kind
    folder.mkdir(parents=True, exist_ok=True)
    cached = sorted(folder.glob(_pattern(name, version, kind)))
    if cached:
        return cached[0], _verify(cached[0], hashes, "cached copy")
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        _pip_download(f"{name}=={version}", kind, Path(tmp))
        found = sorted(Path(tmp).glob(_pattern(name, version, kind)))
        if not found:
            raise ForkError(f"pip saved no {kind} matching {_pattern(name, version, kind)} for {name}=={version}")
        digest = _verify(found[0], hashes, "fresh download")
        final = folder / found[0].name
        os.replace(found[0], final)
    return final, digest

