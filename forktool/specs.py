"""Load and validate the edit specs under edits/: one TOML file per upstream file, mirroring its path."""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkError
from forktool.ops import OPERATIONS

SUFFIX = ".toml"
PROVENANCE = ("why", "upstream", "remove_when")
COMMON = {"id", "op", "expect", *PROVENANCE}


@dataclass(frozen=True)
class Edit:
    """One declarative edit, with where it came from."""

    spec_file: str  # repo-relative path of the spec, e.g. edits/vllm/x.py.toml
    target: str  # upstream path it edits, e.g. vllm/x.py
    title: str  # the spec's title: subject of its exported patch
    id: str
    op: str
    params: dict
    expect: int
    why: str
    upstream: str
    remove_when: str

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
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _check_upstream(value: str) -> bool:
    return value.startswith("https://") or (
        value.startswith("fork-only:") and value[len("fork-only:"):].strip() != ""
    )


def _edit_from_table(spec_file: str, target: str, title: str, index: int, table: dict) -> Edit:
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
    if not _check_upstream(table["upstream"]):
        raise ForkError(f"{where}: field 'upstream' must be a PR/issue URL (https://...) "
                        "or 'fork-only: <reason>'")
    unknown = set(table) - COMMON - set(fields)
    if unknown:
        raise ForkError(f"{where}: unknown field(s) {sorted(unknown)} for op {op}; "
                        f"it takes {sorted(fields)}")
    params = {}
    for name, required in fields.items():
        if name in table:
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
    return Edit(spec_file, target, title, edit_id, op, params, expect,
                table["why"].strip(), table["upstream"].strip(), table["remove_when"].strip())


def load_spec(path: Path, edits_root: Path, repo_root: Path) -> list[Edit]:
    """Parse one spec file; any problem raises ForkError naming the file and the edit."""
    spec_file = path.relative_to(repo_root).as_posix()
    if not path.name.endswith(SUFFIX):
        raise ForkError(f"{spec_file}: spec files are named <upstream path>{SUFFIX}")
    target = path.relative_to(edits_root).as_posix()[: -len(SUFFIX)]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ForkError(f"{spec_file}: not valid TOML ({exc})") from exc
    unknown = set(data) - {"title", "edit"}
    if unknown:
        raise ForkError(f"{spec_file}: unknown top-level key(s) {sorted(unknown)}; use [[edit]] tables")
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ForkError(f"{spec_file}: missing top-level 'title' (the subject of its upstream patch)")
    tables = data.get("edit")
    if not isinstance(tables, list) or not tables:
        raise ForkError(f"{spec_file}: no [[edit]] tables; delete the file or add an edit")
    edits = [_edit_from_table(spec_file, target, title.strip(), i, t) for i, t in enumerate(tables)]
    ids = [edit.id for edit in edits]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ForkError(f"{spec_file}: edit id '{duplicate}' is used twice; ids are unique per file")
    return edits


def load_all(edits_root: Path, repo_root: Path) -> list[Edit]:
    """All edits under edits_root, in path order; stray non-spec files are an error, not skipped."""
    edits: list[Edit] = []
    for path in sorted(p for p in edits_root.rglob("*") if p.is_file()):
        edits.extend(load_spec(path, edits_root, repo_root))
    return edits
