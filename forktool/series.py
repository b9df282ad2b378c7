"""The upstream PR series (upstream-prs/series.toml): which edits go in which PR, in what order, with which test."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkError
from forktool.specs import Edit

SERIES_FILE = "upstream-prs/series.toml"
TESTS_ROOT = "upstream-prs"  # a PR's test `tests/x.py` lives at upstream-prs/tests/x.py here
FIELDS = {"id", "title", "body", "tests", "depends_on"}


@dataclass(frozen=True)
class PullRequest:
    """One PR as upstream would take it: title, description, tests at upstream's paths, prerequisites."""

    id: str
    title: str
    body: str
    tests: tuple[str, ...]
    depends_on: tuple[str, ...]


def _entry(index: int, table: dict, root: Path, known: set[str]) -> PullRequest:
    where = f"{SERIES_FILE}: [[pr]] #{index + 1}"
    pr_id = table.get("id")
    if not isinstance(pr_id, str) or not pr_id.strip():
        raise ForkError(f"{where}: missing field 'id'")
    where = f"{SERIES_FILE}: pr '{pr_id}'"
    if pr_id in known:
        raise ForkError(f"{where}: id used twice")
    unknown = set(table) - FIELDS
    if unknown:
        raise ForkError(f"{where}: unknown field(s) {sorted(unknown)}; it takes {sorted(FIELDS)}")
    for name in ("title", "body"):
        if not isinstance(table.get(name), str) or not table[name].strip():
            raise ForkError(f"{where}: missing field '{name}' (the PR's {name} upstream)")
    tests, depends = table.get("tests"), table.get("depends_on", [])
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise ForkError(f"{where}: field 'tests' lists the PR's test files at upstream's path (tests/...)")
    for test in tests:
        if not test.startswith("tests/") or not (root / TESTS_ROOT / test).is_file():
            raise ForkError(f"{where}: test {test} is not a file at {TESTS_ROOT}/{test}; write it there "
                            "(upstream's tests/ path) or fix the entry")
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise ForkError(f"{where}: field 'depends_on' is a list of earlier pr ids")
    for dep in depends:
        if dep not in known:
            raise ForkError(f"{where}: depends on '{dep}', which is not an earlier entry; order the series "
                            "so every PR follows what it depends on")
    return PullRequest(pr_id, table["title"].strip(), table["body"].strip(), tuple(tests), tuple(depends))


def load_series(root: Path) -> list[PullRequest]:
    """The series in its file's order (a PR after everything it depends on); bad input raises ForkError."""
    path = root / SERIES_FILE
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ForkError(f"{SERIES_FILE}: not valid TOML ({exc})") from exc
    if set(data) - {"pr"} or not isinstance(data.get("pr", []), list):
        raise ForkError(f"{SERIES_FILE}: only [[pr]] tables belong here")
    entries: list[PullRequest] = []
    for index, table in enumerate(data.get("pr", [])):
        entries.append(_entry(index, table, root, {e.id for e in entries}))
    return entries


def check_series(series: list[PullRequest], edits: list[Edit]) -> None:
    """Every upstreamable edit names a known PR and every PR has edits; bad input names both sides."""
    known = {pr.id for pr in series}
    for edit in edits:
        if edit.pr is not None and edit.pr not in known:
            raise ForkError(f"{edit.spec_file}: edit '{edit.id}': pr '{edit.pr}' is not an entry of {SERIES_FILE}; "
                            "add it there or name an existing one")
    used = {e.pr for e in edits}
    for pr in series:
        if pr.id not in used:
            raise ForkError(f"{SERIES_FILE}: pr '{pr.id}' has no edits (no edits/**.toml names it with pr = "
                            f"\"{pr.id}\"); remove the entry or point a spec at it")
