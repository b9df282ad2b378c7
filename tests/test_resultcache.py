"""The result cache (forktool/resultcache.py) returns exactly what the step gives, and only for the same inputs."""

from __future__ import annotations

import dataclasses

import pytest

from forktool.apply import apply_edits, apply_key
from forktool.specs import Edit
from forktool.vocabulary import EditStatus

SOURCE = "class Model(Base):\n    pass\n\n\nclass Other:\n    pass\n"
TARGET = "vllm/model.py"


def _edit(cls: str, base: str = "SupportsEagle3", expect: int = 1) -> Edit:
    return Edit(spec_file="edits/vllm/model.py.toml", target=TARGET, id=f"add-{cls}", op="add_base",
                params={"class": cls, "base": base}, expect=expect, why="test", upstream="new: test",
                remove_when="never")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FORKTOOL_CACHE", str(tmp_path))
    monkeypatch.delenv("FORKTOOL_RESULT_CACHE", raising=False)
    return tmp_path / "results" / "applied"


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
    assert apply_key(SOURCE, [change(edit)]) != apply_key(SOURCE, [edit])
    assert apply_key(SOURCE + "\n", [edit]) != apply_key(SOURCE, [edit])


def test_a_damaged_entry_is_applied_again(cache):
    first = _outcome([_edit("Model")])
    [entry] = cache.rglob("*.json")
    entry.write_text('{"code": ')
    assert _outcome([_edit("Model")]) == first
    assert entry.read_text().startswith('{"code": "class Model(Base, SupportsEagle3)')


def test_switched_off_it_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("FORKTOOL_RESULT_CACHE", "0")
    _outcome([_edit("Model")])
    assert not cache.exists()


def test_format_reuses_a_file_formatted_before_and_formats_only_the_new_one(cache, monkeypatch):
    from forktool import format as fmt
    from forktool.project import REPO_ROOT

    modules = {"vllm/__init__.py", "vllm/model.py", "vllm/config/__init__.py"}
    messy = "import vllm.config\nimport os\nx = {'a':1}\n"
    [first] = fmt.format_sources(REPO_ROOT, [{TARGET: messy}], modules)
    assert first[TARGET] == 'import os\n\nimport vllm.config\n\nx = {"a": 1}\n'  # isort, then format
    batches = []
    real = fmt._ruff_batch
    monkeypatch.setattr(fmt, "_ruff_batch", lambda *a: batches.append(a[1]) or real(*a))
    other = "vllm/other.py"
    [again] = fmt.format_sources(REPO_ROOT, [{TARGET: messy, other: "y=[1,2]\n"}], modules)
    assert again == {TARGET: first[TARGET], other: "y = [1, 2]\n"}
    assert batches == [[{other: "y=[1,2]\n"}]]  # only the file not seen before went through ruff


def test_the_contract_table_is_classified_once_per_fork_and_upstream(cache, monkeypatch):
    from forktool import contract_table
    from forktool.assembly import Assembly
    from forktool.sourcetree import SourceTree

    upstream = SourceTree({TARGET: SOURCE}.__getitem__, {TARGET})
    fork = Assembly(upstream, {TARGET: SOURCE}, [], {"vllm/_fork/x.py": b"y = 1\n"})
    calls = []
    monkeypatch.setattr(contract_table, "render_contract",
                        lambda tree, base, results=None: calls.append(base) or b"table")
    assert contract_table.contract_module(fork, "0" * 64, "vllm 1.0+fork") == b"table"
    assert contract_table.contract_module(fork, "0" * 64, "vllm 1.0+fork") == b"table"
    assert calls == ["vllm 1.0+fork"]
    contract_table.contract_module(fork, "1" * 64, "vllm 1.0+fork")  # another upstream artifact
    other = Assembly(upstream, {TARGET: SOURCE + "\n"}, [], fork.overlay)
    contract_table.contract_module(other, "0" * 64, "vllm 1.0+fork")  # another fork
    assert len(calls) == 3
