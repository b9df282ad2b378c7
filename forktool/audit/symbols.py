"""Static symbol resolution over a vLLM source tree: modules, classes, imports and re-exports."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable


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


class SourceTree:
    """A vLLM source tree readable by path (`vllm/x/y.py`), with modules parsed on demand."""

    def __init__(self, read: Callable[[str], str], paths: set[str]):
        self.read, self.paths = read, paths
        self._modules: dict[str, Module | None] = {}

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
        if depth > 8:
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
