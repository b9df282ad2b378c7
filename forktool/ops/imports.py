"""Operation ensure_import: make sure `from <module> import <name>` holds at module level."""

from __future__ import annotations

import ast

import libcst as cst

from forktool.ops.base import Outcome, code_of
from forktool.ops.seq import insert_item

FIELDS = {"module": True, "name": True}


def _as_ast(node: cst.ImportFrom) -> ast.ImportFrom:
    """The import as Python's AST sees it: the one equivalence every operation uses (layout ignored)."""
    return ast.parse(code_of(node)).body[0]


def _module_name(node: cst.ImportFrom) -> str:
    """Module name, relative dots included (`.interfaces`)."""
    parsed = _as_ast(node)
    return "." * parsed.level + (parsed.module or "")


def _check_fields(spec: dict) -> None:
    """module is a dotted name (leading dots allowed), name an identifier: anything else is bad input."""
    if not all(part.isidentifier() for part in spec["module"].lstrip(".").split(".")):
        raise ValueError(f"field 'module' is not a dotted module name: {spec['module']!r}")
    if not spec["name"].isidentifier():
        raise ValueError(f"field 'name' is not a Python identifier: {spec['name']!r}")


def _from_imports(module: cst.Module, wanted: str) -> list[tuple[int, cst.ImportFrom]]:
    """Top-level `from wanted import ...` statements with their index in the module body."""
    found = []
    for index, stmt in enumerate(module.body):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.ImportFrom) and _module_name(small) == wanted:
                    found.append((index, small))
    return found


def _imports_name(node: cst.ImportFrom, name: str) -> bool:
    if isinstance(node.names, cst.ImportStar):
        return True
    return any(alias.name == name and alias.asname in (None, name) for alias in _as_ast(node).names)


def _sort_key(name: str) -> tuple[int, str]:
    """isort/ruff's order-by-type: CONSTANTS, then Classes, then functions."""
    rank = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return rank, name


def _insert_name(node: cst.ImportFrom, name: str) -> cst.ImportFrom:
    names = list(node.names)
    keys = [_sort_key(alias.name) for alias in _as_ast(node).names]
    index = None
    if keys == sorted(keys):  # keep a sorted list sorted; otherwise append
        index = next((i for i, key in enumerate(keys) if key > _sort_key(name)), None)
    new_alias = cst.ImportAlias(name=cst.Name(name))
    return node.with_changes(names=insert_item(names, new_alias, index))


def _last_import_index(module: cst.Module) -> int:
    last = -1
    for index, stmt in enumerate(module.body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in stmt.body
        ):
            last = index
    return last


def apply(module: cst.Module, spec: dict) -> Outcome:
    """Add `name` to the one from-import of `module`, or (expect = 0) add a new import line."""
    _check_fields(spec)
    wanted, name = spec["module"], spec["name"]
    found = _from_imports(module, wanted)
    if any(_imports_name(node, name) for _, node in found):
        return Outcome(len(found), len(found), module)
    if len(found) == 1:
        index, node = found[0]
        line = module.body[index]
        body = [_insert_name(small, name) if small is node else small for small in line.body]
        new_body = list(module.body)
        new_body[index] = line.with_changes(body=body)
        return Outcome(1, 0, module.with_changes(body=new_body))
    if not found:
        statement = cst.parse_statement(f"from {wanted} import {name}\n")
        new_body = list(module.body)
        new_body.insert(_last_import_index(module) + 1, statement)
        return Outcome(0, 0, module.with_changes(body=new_body))
    return Outcome(len(found), 0, module, note=f"{len(found)} from-imports of {wanted}; merge them upstream-style or anchor elsewhere")


def describe(spec: dict) -> str:
    """Short anchor text for messages."""
    return f"from {spec['module']} import {spec['name']}"
