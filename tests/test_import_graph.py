"""forktool's import graph, read from its source with ast: every module in a layer, no upward import, no circle;
and no circle among the fork's overlay modules under vllm/_fork either.

The modules sit in the layers of LAYERS, lowest first. An import is *upward* when a module imports one of a higher
layer than its own: a shared word that knows a tool, a tool that knows the fork's inputs, an input that knows a
build step, a step that knows the verb that runs it, anything but an entry point that knows an entry point. A
module may import its own layer and the ones below; within a layer the imports must not form a circle (nor may any
others). An import inside a function counts like any other: deferring it hides neither a circle nor a layer.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORKTOOL = ROOT / "forktool"
OVERLAY = ROOT / "vllm" / "_fork"

# Lowest first. A name covers the module and, for a package, its submodules; the longest name that matches wins.
LAYERS = {
    "words": ("vocabulary", "errors"),
    "tools": ("atomic", "rawzip", "fetch", "resultcache", "pins", "overlay", "sourcetree", "ops"),
    "inputs": ("specs", "series", "project", "options"),
    "steps": ("apply", "format", "manifest", "internals", "assembly", "audit", "contract_table", "wheelbuild",
              "tree"),
    "verbs": ("build", "check", "export", "history", "audit.run", "ledger"),
    "entry points": ("cli", "__main__", "migrate"),
}


def module_name(path: Path, root: Path = FORKTOOL) -> str:
    """forktool/audit/run.py -> 'audit.run'; a package's __init__.py is the package ('' for the root itself)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(name: str, source: str, modules: set[str], is_package: bool = False,
             package: str = "forktool") -> set[str]:
    """The modules of `package` that `name`'s source imports anywhere (top level, functions, relative imports)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                where = (package.split(".") + (name.split(".") if name else []))[: None if is_package else -1]
                base = ".".join(where[: len(where) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            dotted = [f"{base}.{alias.name}" for alias in node.names]  # `from package import x` imports module x
        else:
            continue
        for target in dotted:
            parts = target.removeprefix(package + ".").split(".") if target.startswith(package + ".") else []
            while parts and ".".join(parts) not in modules:  # `forktool.a.B` is module a (B is a name in it)
                parts.pop()
            if parts and ".".join(parts) != name:
                found.add(".".join(parts))
    return found


def layer_of(name: str) -> int | None:
    """Index in LAYERS of the longest entry that is `name` or a package holding it."""
    best = None
    for index, names in enumerate(LAYERS.values()):
        for entry in names:
            if (name == entry or name.startswith(entry + ".")) and (best is None or len(entry) > len(best[1])):
                best = (index, entry)
    return best[0] if best else None


@cache
def graph(root: Path = FORKTOOL, package: str = "forktool") -> dict[str, set[str]]:
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    paths.pop("", None)  # the root's __init__.py holds only the package docstring
    return {name: imported(name, path.read_text(encoding="utf-8"), set(paths), path.name == "__init__.py", package)
            for name, path in paths.items()}


def circle(edges: dict[str, set[str]]) -> list[str]:
    """One import circle (a, b, ..., a), or [] when the graph has none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once every import below is explored
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = "open"
        path.append(name)
        for target in sorted(edges[name]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[name] = "done"
        path.pop()
        return []

    for name in sorted(edges):
        if name not in state and (found := visit(name)):
            return found
    return []


def test_the_reader_sees_every_way_of_importing():
    modules = {"a", "b", "c", "audit", "audit.run", "audit.classify"}
    source = ("import forktool.a\nfrom forktool import b\nfrom .classify import Row\nfrom . import run\n"
              "def later():\n    from forktool.c import thing\n")
    assert imported("audit.report", source, modules) == {"a", "b", "c", "audit.classify", "audit.run"}
    assert imported("audit", "from .run import x\n", modules, is_package=True) == {"audit.run"}
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    assert (layer_of("audit.classify"), layer_of("audit.run"), layer_of("nowhere")) == (3, 4, None)


def test_every_module_has_a_layer():
    assert [name for name in graph() if layer_of(name) is None] == [], "place each new module in LAYERS"


def test_no_upward_import():
    names = list(LAYERS)
    upward = [f"{name} ({names[layer_of(name)]}) imports {target} ({names[layer_of(target)]})"
              for name, targets in graph().items() for target in sorted(targets)
              if layer_of(name) is not None and layer_of(target) is not None and layer_of(target) > layer_of(name)]
    assert upward == []


def test_no_circle():
    assert circle(graph()) == []


def test_no_circle_in_the_overlay():
    """vllm/_fork (spec-check, KV pools, the capture contract) has no layers of its own, but no circle either."""
    edges = graph(OVERLAY, "vllm._fork")
    assert "spec_check.checks" in edges and "spec_check.run" in edges["spec_check.cli"] | edges["spec_check.subcommand"]
    assert circle(edges) == []
