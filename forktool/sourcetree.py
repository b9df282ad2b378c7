"""A vLLM source tree read statically (AST): what a name, a class or a class member refers to, across imports.

One resolver for the audit (which classes can `module.Name` be) and the internals check (is this private name
still defined, is this class member still there); it never imports the code it reads.
"""

from __future__ import annotations

import ast
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

MAX_HOPS = 8  # re-exports followed before giving up


@dataclass(frozen=True)
class ClassRef:
    """A class found in the tree: its module and its AST node."""

    module: str
    name: str
    node: ast.ClassDef = field(compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.module}.{self.name}"


class Module:
    """One parsed module: its top-level classes and the names it imports (every branch of if/try)."""

    def __init__(self, name: str, path: str, tree: ast.Module, is_package: bool):
        self.name, self.path, self.tree, self.is_package = name, path, tree, is_package

    @cached_property
    def classes(self) -> dict[str, ast.ClassDef]:
        return {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}

    @cached_property
    def imports(self) -> dict[str, list[tuple[str, str]]]:
        """local name -> [(module, name)]: several when platform branches import different classes."""
        found: dict[str, list[tuple[str, str]]] = {}
        for node in _top_level(self.tree.body):
            if isinstance(node, ast.ImportFrom):
                module = self._absolute(node.module, node.level)
                for alias in node.names:
                    found.setdefault(alias.asname or alias.name, []).append((module, alias.name))
        return found

    def _absolute(self, module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        parts = self.name.split(".")
        base = parts if self.is_package else parts[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else []))


def _top_level(body: list[ast.stmt]):
    """Statements at module level, descending into if/else and try blocks (not functions or classes)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from _top_level(block)


def _bound_names(node: ast.stmt) -> list[str]:
    """Names a statement binds in its scope (defs, classes, assignments)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    return [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]


def _binds_member(cls: ast.ClassDef, attr: str) -> bool:
    """`attr` is bound in the class body or assigned as `self.attr` in one of its methods."""
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
    return False


class SourceTree:
    """A vLLM source tree readable by path (`vllm/x/y.py`), with modules parsed on demand."""

    def __init__(self, read: Callable[[str], str], paths: set[str]):
        self.read, self.paths = read, paths
        self._modules: dict[str, Module | None] = {}

    @classmethod
    def from_zip(cls, archive: zipfile.ZipFile) -> SourceTree:
        """The files of an open wheel, read as text when asked for."""
        return cls(lambda path: archive.read(path).decode("utf-8"), set(archive.namelist()))

    def laid_over(self, files: dict[str, str]) -> SourceTree:
        """This tree with `files` ({path: text}) replacing or adding to its own."""
        return SourceTree(lambda path: files[path] if path in files else self.read(path), self.paths | set(files))

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def _load(self, name: str) -> Module | None:
        base = name.replace(".", "/")
        for path, is_package in ((f"{base}.py", False), (f"{base}/__init__.py", True)):
            if path in self.paths:
                try:
                    tree = ast.parse(self.read(path))
                except SyntaxError:
                    return None
                return Module(name, path, tree, is_package)
        return None

    def resolve(self, module: str, name: str, depth: int = 0) -> list[ClassRef]:
        """Every class `module.name` can be, following imports and platform re-exports."""
        if depth > MAX_HOPS:
            return []
        mod = self.module(module)
        if mod is None:
            # `from pkg import submodule` style references are not classes.
            return []
        if name in mod.classes:
            return [ClassRef(module, name, mod.classes[name])]
        found: list[ClassRef] = []
        for source_module, source_name in mod.imports.get(name, []):
            for ref in self.resolve(source_module, source_name, depth + 1):
                if ref not in found:
                    found.append(ref)
        return found

    def resolve_expr(self, module: str, node: ast.expr) -> list[ClassRef]:
        """Classes a base-class or call expression (`Name` or `mod.Name`) refers to in `module`."""
        if isinstance(node, ast.Name):
            return self.resolve(module, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            mod = self.module(module)
            targets = mod.imports.get(node.value.id, []) if mod else []
            found = []
            for source_module, source_name in targets:
                found += self.resolve(f"{source_module}.{source_name}", node.attr)
            return found
        if isinstance(node, ast.Subscript):  # Generic[T] and friends
            return self.resolve_expr(module, node.value)
        return []

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """The class and its resolvable ancestors, depth first (enough for membership questions)."""
        seen: list[ClassRef] = []
        stack = [ref]
        while stack:
            current = stack.pop(0)
            if current in seen:
                continue
            seen.append(current)
            for base in current.node.bases:
                stack.extend(self.resolve_expr(current.module, base))
        return seen

    def definition(self, module: str, name: str, hops: int = 0) -> tuple[str, ast.AST] | None:
        """(module, node) of the first module-level statement that binds `name`, through re-exports; a package's
        submodule counts (`from vllm import platforms`). None when `module` does not define it."""
        mod = self.module(module)
        if mod is None or hops > MAX_HOPS:
            return None
        for node in _top_level(mod.tree.body):
            if name in _bound_names(node):
                return module, node
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = mod._absolute(node.module, node.level)
                        return self.definition(source, alias.name, hops + 1) or (
                            (module, node) if self.module(f"{source}.{alias.name}") else None)
        return (module, mod.tree) if mod.is_package and self.module(f"{module}.{name}") else None

    def has_member(self, ref: ClassRef, attr: str) -> bool:
        """The class or one of its resolvable ancestors binds `attr` in its body or as `self.attr` in a method."""
        return any(_binds_member(cls.node, attr) for cls in self.mro(ref))
