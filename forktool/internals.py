"""Declared upstream internals (requirements/upstream-internals.toml), resolved statically in a base's sources."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkError
from forktool.sourcetree import ClassRef, SourceTree
from forktool.vocabulary import InternalStatus

INTERNALS_PATH = "requirements/upstream-internals.toml"
_FIELDS = {"module": True, "name": True, "used_by": True, "why": True, "public": False}


@dataclass(frozen=True)
class Internal:
    """One private or internal upstream name the fork relies on."""

    module: str
    name: str  # `name` or `Class.attr`
    used_by: tuple[str, ...]
    why: str
    public: str = ""

    @property
    def label(self) -> str:
        return f"{self.module}:{self.name}"


@dataclass(frozen=True)
class InternalResult:
    """Whether one internal resolves in one base, and if not, where the lookup stopped."""

    internal: Internal
    status: InternalStatus
    detail: str = ""

    def line(self) -> str:
        tail = f" — {self.detail}" if self.detail else ""
        return f"{self.status:8} internal {self.internal.label} (used by {', '.join(self.internal.used_by)}){tail}"

    def as_dict(self) -> dict:
        return {"module": self.internal.module, "name": self.internal.name, "status": str(self.status),
                "detail": self.detail, "used_by": list(self.internal.used_by)}


def load_internals(root: Path) -> list[Internal]:
    """The table, validated: a malformed entry is bad input (tests/test_internals.py checks `used_by`)."""
    path = root / INTERNALS_PATH
    if not path.is_file():
        raise ForkError(f"{INTERNALS_PATH}: missing; the fork declares the upstream internals it relies on there")
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("internal", [])
    except tomllib.TOMLDecodeError as exc:
        raise ForkError(f"{INTERNALS_PATH}: not valid TOML ({exc})") from exc
    found = []
    for number, entry in enumerate(entries, 1):
        where = f"{INTERNALS_PATH}: internal #{number}"
        unknown = set(entry) - set(_FIELDS)
        if unknown:
            raise ForkError(f"{where}: unknown field(s) {sorted(unknown)}; use {sorted(_FIELDS)}")
        for field, required in _FIELDS.items():
            if required and not entry.get(field):
                raise ForkError(f"{where}: missing field '{field}'")
        found.append(Internal(entry["module"], entry["name"], tuple(entry["used_by"]), entry["why"],
                              entry.get("public", "")))
    return found


def resolve(internal: Internal, tree: SourceTree) -> InternalResult:
    """Present when the module exists and the (dotted) name is defined in it; broken says what is missing."""
    def broken(why: str) -> InternalResult:
        return InternalResult(internal, InternalStatus.BROKEN, why)

    if tree.module(internal.module) is None:
        return broken(f"no module {internal.module} in this base")
    head, *members = internal.name.split(".")
    found = tree.definition(internal.module, head)
    if found is None:
        return broken(f"{internal.module} defines no {head}")
    module, node = found
    for depth, attr in enumerate(members):
        if not isinstance(node, ast.ClassDef):
            return broken(f"{'.'.join([head, *members[:depth]])} is not a class here; cannot find {attr}")
        if not tree.has_member(ClassRef(module, node.name, node), attr):
            return broken(f"class {node.name} (in {module}) and its bases define no {attr}")
        if depth < len(members) - 1:
            return broken(f"{internal.name}: only Class.attr is resolved; declare the class member instead")
    return InternalResult(internal, InternalStatus.PRESENT)


def check_internals(internals: list[Internal], tree: SourceTree) -> list[InternalResult]:
    """One result per declared internal, in table order, against the base `tree`."""
    return [resolve(internal, tree) for internal in internals]
