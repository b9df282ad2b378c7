"""Load and validate the edit specs under edits/: per upstream file, `<path>.toml` (upstreamable edits, part of a
PR in upstream-prs/series.toml) and `<path>.fork.toml` (edits that stay in the fork), never mixed."""

from __future__ import annotations

import ast
import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkError
from forktool.ops import OPERATIONS

SUFFIX = ".toml"
FORK_SUFFIX = ".fork.toml"
FORK_MODULE = "vllm._fork"
PROVENANCE = ("why", "upstream", "remove_when")
COMMON = {"id", "op", "expect", "pr", "imports", *PROVENANCE}
COUNT_FIELDS = {"occurrence"}  # op fields given as a positive integer, not a string
# Provenance a spec file may give once, at top level, for every edit that does not give its own.
FILE_DEFAULTS = ("upstream", "remove_when")


@dataclass(frozen=True)
class Edit:
    """One declarative edit, with where it came from."""

    spec_file: str  # repo-relative path of the spec, e.g. edits/vllm/x.py.toml
    target: str  # upstream path it edits, e.g. vllm/x.py
    id: str
    op: str
    params: dict
    expect: int
    why: str
    upstream: str
    remove_when: str
    pr: str | None = None  # the series entry it is exported in; None for a fork-only edit
    imports: tuple[tuple[str, str], ...] = ()  # (module, name) pairs the edit's code needs, added when it applies

    @property
    def fork_only(self) -> bool:
        return self.pr is None

    @property
    def label(self) -> str:
        """How messages name this edit: spec file, edit id and anchor."""
        anchor = OPERATIONS[self.op].describe(self.params)
        return f"{self.spec_file}: edit '{self.id}' ({self.op}: {anchor})"

    @property
    def checksum(self) -> str:
        """sha256 of the edit's canonical content, recorded in the manifest."""
        body = {"target": self.target, "id": self.id, "op": self.op, "expect": self.expect,
                "params": self.params, "why": self.why, "upstream": self.upstream,
                "remove_when": self.remove_when}
        if self.imports:  # only then: the checksums of edits without imports stay what they were
            body["imports"] = [list(pair) for pair in self.imports]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _tagged(value: str, tag: str) -> bool:
    return value.startswith(tag) and value[len(tag):].strip() != ""


def _check_kind(where: str, spec_file: str, table: dict, fork_only: bool) -> None:
    """A .toml edit is upstreamable (URL or `new:`, no vllm._fork); a .fork.toml edit says `fork-only:`."""
    upstream = table["upstream"].strip()
    if fork_only:
        if not _tagged(upstream, "fork-only:"):
            raise ForkError(f"{where}: field 'upstream' must be 'fork-only: <reason>' in a {FORK_SUFFIX} file; "
                            f"an upstreamable edit goes in {spec_file.removesuffix(FORK_SUFFIX)}{SUFFIX}")
        return
    home = f"{spec_file.removesuffix(SUFFIX)}{FORK_SUFFIX}"
    if upstream.startswith("fork-only:"):
        raise ForkError(f"{where}: says 'fork-only:' but {spec_file} holds upstreamable edits; move it to {home}")
    if not (upstream.startswith("https://") or _tagged(upstream, "new:")):
        raise ForkError(f"{where}: field 'upstream' must be a PR/issue URL (https://...) or "
                        "'new: <why this is new upstream work>'")
    if any(FORK_MODULE in str(value) for value in table.values()):
        raise ForkError(f"{where}: uses {FORK_MODULE}, which never goes upstream; move it to {home} "
                        "or write the change the way upstream would")


def _imports(where: str, value: object) -> tuple[tuple[str, str], ...]:
    """`imports = ["from .interfaces import SupportsEagle3", ...]`: the from-imports the edit's code needs."""
    hint = "field 'imports' must be a list of 'from <module> import <name>[, <name>]' strings"
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ForkError(f"{where}: {hint}")
    pairs = []
    for item in value:
        try:
            [node] = ast.parse(item).body
        except (SyntaxError, ValueError):
            raise ForkError(f"{where}: {hint}; got {item!r}") from None
        if not isinstance(node, ast.ImportFrom) or any(alias.asname or alias.name == "*" for alias in node.names):
            raise ForkError(f"{where}: {hint}; got {item!r}")
        module = "." * node.level + (node.module or "")
        pairs += [(module, alias.name) for alias in node.names]
    return tuple(pairs)


def _edit_from_table(spec_file: str, target: str, pr: str | None, index: int, table: dict) -> Edit:
    where = f"{spec_file}: edit #{index + 1}"
    edit_id = table.get("id")
    if not isinstance(edit_id, str) or not edit_id:
        raise ForkError(f"{where}: missing field 'id'; give every [[edit]] a short unique id")
    where = f"{spec_file}: edit '{edit_id}'"
    op = table.get("op")
    if op not in OPERATIONS:
        known = ", ".join(sorted(OPERATIONS))
        raise ForkError(f"{where}: unknown op {op!r}; use one of: {known}")
    fields = OPERATIONS[op].fields
    for name in PROVENANCE:
        if not isinstance(table.get(name), str) or not table[name].strip():
            raise ForkError(f"{where}: missing provenance field '{name}'; every edit says why, "
                            "its upstream reference and when to remove it")
    _check_kind(where, spec_file, table, pr is None)
    if "pr" in table:
        if pr is None or not isinstance(table["pr"], str) or not table["pr"].strip():
            raise ForkError(f"{where}: field 'pr' names a series entry (upstream-prs/series.toml); "
                            f"only edits of a {SUFFIX} (not {FORK_SUFFIX}) file take it")
        pr = table["pr"].strip()
    unknown = set(table) - COMMON - set(fields)
    if unknown:
        raise ForkError(f"{where}: unknown field(s) {sorted(unknown)} for op {op}; "
                        f"it takes {sorted(fields)}")
    params = {}
    for name, required in fields.items():
        if name in table and name in COUNT_FIELDS:
            if not isinstance(table[name], int) or isinstance(table[name], bool) or table[name] < 1:
                raise ForkError(f"{where}: field '{name}' must be a positive integer")
            params[name] = str(table[name])
        elif name in table:
            if not isinstance(table[name], str):
                raise ForkError(f"{where}: field '{name}' must be a string")
            params[name] = table[name]
        elif required:
            raise ForkError(f"{where}: missing field '{name}' required by op {op}")
    expect = table.get("expect", 1)
    if not isinstance(expect, int) or isinstance(expect, bool) or expect < 0:
        raise ForkError(f"{where}: field 'expect' must be a non-negative integer (matches required)")
    if op == "ensure_import" and expect > 1:
        raise ForkError(f"{where}: ensure_import takes expect = 1 (extend the import) or 0 (new line)")
    return Edit(spec_file, target, edit_id, op, params, expect,
                table["why"].strip(), table["upstream"].strip(), table["remove_when"].strip(), pr,
                _imports(where, table.get("imports", [])))


def load_spec(path: Path, edits_root: Path, repo_root: Path) -> list[Edit]:
    """Parse one spec file; any problem raises ForkError naming the file and the edit."""
    spec_file = path.relative_to(repo_root).as_posix()
    if not path.name.endswith(SUFFIX):
        raise ForkError(f"{spec_file}: spec files are named <upstream path>{SUFFIX} or <upstream path>{FORK_SUFFIX}")
    fork_only = path.name.endswith(FORK_SUFFIX)
    target = path.relative_to(edits_root).as_posix()[: -len(FORK_SUFFIX if fork_only else SUFFIX)]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ForkError(f"{spec_file}: not valid TOML ({exc})") from exc
    unknown = set(data) - {"edit", *FILE_DEFAULTS} - (set() if fork_only else {"pr"})
    if unknown:
        hint = {"pr": f" (a {FORK_SUFFIX} file is never exported: no 'pr')",
                "title": " (a PR takes its title from upstream-prs/series.toml; describe the file in a comment)"}
        raise ForkError(f"{spec_file}: unknown top-level key(s) {sorted(unknown)}; use [[edit]] tables"
                        + "".join(hint.get(key, "") for key in sorted(unknown)))
    defaults = {key: data[key] for key in FILE_DEFAULTS if key in data}
    if not all(isinstance(value, str) and value.strip() for value in defaults.values()):
        raise ForkError(f"{spec_file}: top-level {sorted(defaults)} must be non-empty strings (every edit's default)")
    pr = None
    if not fork_only:
        pr = data.get("pr")
        if not isinstance(pr, str) or not pr.strip():
            raise ForkError(f"{spec_file}: missing top-level 'pr' (the id of its entry in upstream-prs/series.toml); "
                            f"edits that stay in the fork go in {spec_file.removesuffix(SUFFIX)}{FORK_SUFFIX}")
        pr = pr.strip()
    tables = data.get("edit")
    if not isinstance(tables, list) or not tables:
        raise ForkError(f"{spec_file}: no [[edit]] tables; delete the file or add an edit")
    if not all(isinstance(t, dict) for t in tables):
        raise ForkError(f"{spec_file}: every [[edit]] must be a table")
    edits = [_edit_from_table(spec_file, target, pr, i, {**defaults, **t}) for i, t in enumerate(tables)]
    ids = [edit.id for edit in edits]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ForkError(f"{spec_file}: edit id '{duplicate}' is used twice; ids are unique per file")
    return edits


def load_all(edits_root: Path, repo_root: Path) -> list[Edit]:
    """All edits under edits_root by upstream path, each file's upstreamable edits before its fork-only ones
    (which may anchor on them); stray non-spec files are an error, not skipped."""
    edits: list[Edit] = []
    for path in sorted(p for p in edits_root.rglob("*") if p.is_file()):
        edits.extend(load_spec(path, edits_root, repo_root))
    return sorted(edits, key=lambda e: (e.target, e.fork_only))  # stable: spec order within each file
