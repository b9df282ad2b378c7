"""Declared upstream internals (requirements/upstream-internals.toml), resolved statically in a base's sources."""

from __future__ import annotations

import ast
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from forktool.errors import FindingsError, ForkError
from forktool.vocabulary import EditStatus, InternalStatus

INTERNALS_PATH = "requirements/upstream-internals.toml"
_FIELDS = {"module": True, "name": True, "used_by": True, "why": True, "public": False}
_MAX_HOPS = 8  # re-exports and base classes followed before giving up


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


class _Sources:
    """Parsed modules of one base, read on demand by module name."""

    def __init__(self, read: Callable[[str], str], paths: set[str]):
        self.read, self.paths, self.parsed = read, paths, {}

    def module(self, name: str) -> tuple[ast.Module, bool] | None:
        """(AST, is_package) of module `name`, or None when the base has no such module."""
        stem = name.replace(".", "/")
        for path, package in ((f"{stem}.py", False), (f"{stem}/__init__.py", True)):
            if path in self.paths:
                if path not in self.parsed:
                    self.parsed[path] = ast.parse(self.read(path))
                return self.parsed[path], package
        return None


def _top_level(body: list[ast.stmt]):
    """Module-level statements, inside if/else and try blocks too."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + node.finalbody
                                  + [s for handler in node.handlers for s in handler.body])


def _bound_names(node: ast.stmt) -> list[str]:
    """Names a statement binds in its scope (defs, classes, assignments)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    return [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _lookup(sources: _Sources, module: str, name: str, hops: int = 0):
    """(module, node) where `name` is defined at module level, following re-exports; None if it is not."""
    loaded = sources.module(module)
    if loaded is None or hops > _MAX_HOPS:
        return None
    tree, package = loaded
    for node in _top_level(tree.body):
        if name in _bound_names(node):
            return module, node
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module, package, node)
                    return _lookup(sources, source, alias.name, hops + 1) or (
                        (module, node) if sources.module(f"{source}.{alias.name}") else None)
    # A submodule of a package is an attribute of it once imported (`from vllm import platforms`).
    return (module, tree) if package and sources.module(f"{module}.{name}") else None


def _class_member(sources: _Sources, module: str, cls: ast.ClassDef, attr: str, hops: int = 0) -> bool:
    """Whether `attr` is defined in the class body, assigned as `self.attr` in a method, or in a base."""
    for node in cls.body:
        if attr in _bound_names(node):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
                    sub, ast.AnnAssign) else []
                if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                       and t.value.id == "self" for t in targets):
                    return True
    if hops > _MAX_HOPS:
        return False
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else None
        found = _lookup(sources, module, base_name) if base_name else None
        if found and isinstance(found[1], ast.ClassDef) and _class_member(sources, found[0], found[1], attr, hops + 1):
            return True
    return False


def resolve(internal: Internal, sources: _Sources) -> InternalResult:
    """Present when the module exists and the (dotted) name is defined in it; broken says what is missing."""
    def broken(why: str) -> InternalResult:
        return InternalResult(internal, InternalStatus.BROKEN, why)

    if sources.module(internal.module) is None:
        return broken(f"no module {internal.module} in this base")
    head, *members = internal.name.split(".")
    found = _lookup(sources, internal.module, head)
    if found is None:
        return broken(f"{internal.module} defines no {head}")
    module, node = found
    for depth, attr in enumerate(members):
        if not isinstance(node, ast.ClassDef):
            return broken(f"{'.'.join([head, *members[:depth]])} is not a class here; cannot find {attr}")
        if not _class_member(sources, module, node, attr):
            return broken(f"class {node.name} (in {module}) and its bases define no {attr}")
        if depth < len(members) - 1:
            return broken(f"{internal.name}: only Class.attr is resolved; declare the class member instead")
    return InternalResult(internal, InternalStatus.PRESENT)


def check_internals(internals: list[Internal], read: Callable[[str], str], paths: set[str]) -> list[InternalResult]:
    """One result per declared internal, in table order, against the base `read(path)` among `paths`."""
    sources = _Sources(read, paths)
    return [resolve(internal, sources) for internal in internals]


def check_for_build(project, wheel: Path, allow_absent: bool, skip: frozenset[str]) -> list[InternalResult]:
    """Resolve the internals in the upstream wheel before building; a broken one stops the build (a finding)."""
    # Listed after the broken edits, so one run names every culprit. On a test-only base (allow_absent)
    # the caller prints them once the build succeeded, like absent edits: never silent.
    from forktool.project import assemble  # project imports the ops; keep this module light to import

    with zipfile.ZipFile(wheel) as zin:
        names = set(zin.namelist())
        results = check_internals(load_internals(project.root), lambda p: zin.read(p).decode("utf-8"), names)
        broken = [r.line() for r in results if r.status == InternalStatus.BROKEN]
        if broken and not allow_absent:
            fork = assemble(project, lambda p: zin.read(p).decode("utf-8"), names, allow_absent, skip, formatted=False)
            edits = [r.line() for r in fork.results if r.status == EditStatus.BROKEN]
            raise FindingsError("\n".join(edits + broken))
    return results
