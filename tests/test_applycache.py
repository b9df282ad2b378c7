"""The per-file cache of applied edits returns exactly what applying gives, and only for the same inputs."""

from __future__ import annotations

import dataclasses

import pytest

from forktool import applycache
from forktool.apply import apply_edits
from forktool.specs import Edit
from forktool.vocabulary import EditStatus

SOURCE = "class Model(Base):\n    pass\n\n\nclass Other:\n    pass\n"
TARGET = "vllm/model.py"


def _edit(cls: str, base: str = "SupportsEagle3", expect: int = 1) -> Edit:
    return Edit(spec_file="edits/vllm/model.py.toml", target=TARGET, title="", id=f"add-{cls}", op="add_base",
                params={"class": cls, "base": base}, expect=expect, why="test", upstream="new: test",
                remove_when="never")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FORKTOOL_CACHE", str(tmp_path))
    monkeypatch.delenv("FORKTOOL_APPLY_CACHE", raising=False)
    return tmp_path / "applied"


def _outcome(edits: list[Edit]) -> tuple:
    changed, results = apply_edits({TARGET: SOURCE}, edits)
    return changed, [(r.edit, r.status, r.detail) for r in results]


def test_a_second_apply_comes_from_the_cache_and_equals_the_first(cache, monkeypatch):
    edits = [_edit("Model"), _edit("Gone")]
    first = _outcome(edits)
    assert first[0][TARGET].startswith("class Model(Base, SupportsEagle3):")
    assert [status for _, status, _ in first[1]] == [EditStatus.CLEAN, EditStatus.BROKEN]
    assert len(list(cache.rglob("*.json"))) == 1

    def no_parse(_source):  # a hit must not apply anything again
        raise AssertionError("applied again despite a cache entry")

    monkeypatch.setattr("forktool.apply.cst.parse_module", no_parse)
    assert _outcome(edits) == first


@pytest.mark.parametrize("change", [
    lambda e: dataclasses.replace(e, params={**e.params, "base": "SupportsPP"}),
    lambda e: dataclasses.replace(e, expect=2),
    lambda e: dataclasses.replace(e, op="ensure_import", params={"module": "x", "name": "y"}),
], ids=["params", "expect", "op"])
def test_any_change_to_an_edit_misses(cache, change):
    edit = _edit("Model")
    _outcome([edit])
    assert applycache.key(SOURCE, [change(edit)]) != applycache.key(SOURCE, [edit])
    assert applycache.key(SOURCE + "\n", [edit]) != applycache.key(SOURCE, [edit])


def test_a_damaged_entry_is_applied_again(cache):
    first = _outcome([_edit("Model")])
    [entry] = cache.rglob("*.json")
    entry.write_text('{"code": ')
    assert _outcome([_edit("Model")]) == first
    assert entry.read_text().startswith('{"code": "class Model(Base, SupportsEagle3)')


def test_switched_off_it_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("FORKTOOL_APPLY_CACHE", "0")
    _outcome([_edit("Model")])
    assert not cache.exists()
