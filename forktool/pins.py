"""Read the single upstream pin: a pip requirements file with one `name==version` and its sha256 hashes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from forktool.errors import ForkError

_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")
# A test-only base names the build flags it needs in a comment pip ignores (requirements/cpu-base.txt).
_FLAGS = re.compile(r"^#\s*forktool build flags:(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Pin:
    """One pinned distribution: name, exact version and the sha256 of each allowed file."""

    name: str
    version: str
    hashes: frozenset[str]
    build_flags: tuple[str, ...] = ()  # what `build` needs on this base, e.g. ("--allow-absent",)

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def _logical_lines(text: str) -> list[str]:
    """Join backslash continuations and drop comments, as pip does."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [re.sub(r"(^|\s)#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line]


def exact_requirement(text: str, where: str) -> tuple[str, str]:
    """(name, version) of `name==version`; anything looser is refused, naming `where`."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ForkError(f"{where}: {text!r} is not a requirement ({exc})") from exc
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==":
        raise ForkError(f"{where}: {text!r} must name one exact release with '==', e.g. vllm==0.29.0")
    return req.name, specs[0].version


def load_pin(path: Path) -> Pin:
    """Parse `path`; anything but exactly one `name==version --hash=sha256:...` line is refused."""
    text = path.read_text(encoding="utf-8")
    lines = _logical_lines(text)
    if len(lines) != 1:
        raise ForkError(f"{path}: expected exactly one pinned requirement, found {len(lines)}")
    requirement, *options = lines[0].split()
    name, version = exact_requirement(requirement, str(path))
    hashes = set()
    for option in options:
        match = _HASH.match(option)
        if not match:
            raise ForkError(f"{path}: unexpected {option!r}; only --hash=sha256:<64 hex> follows the pin")
        hashes.add(match.group(1))
    if not hashes:
        raise ForkError(f"{path}: {requirement} has no --hash=sha256:...; pin the wheel and the sdist")
    flags = tuple(flag for line in _FLAGS.findall(text) for flag in line.split())
    return Pin(name, version, frozenset(hashes), flags)
