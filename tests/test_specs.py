"""Bad spec input stops with one line naming the spec file, the edit and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from forktool.errors import ForkError
from forktool.specs import load_all, load_spec

GOOD = '''title = "[Bugfix] Declare B on C"

[[edit]]
id = "declare"
op = "add_base"
class = "C"
base = "B"
why = "because"
upstream = "https://github.com/vllm-project/vllm/pull/1"
remove_when = "upstream has it"
'''


def _spec(tmp_path: Path, text: str, name: str = "vllm/m.py.toml") -> Path:
    path = tmp_path / "edits" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_good_spec_targets_the_mirrored_upstream_path(tmp_path):
    [edit] = load_spec(_spec(tmp_path, GOOD), tmp_path / "edits", tmp_path)
    assert (edit.spec_file, edit.target, edit.expect) == ("edits/vllm/m.py.toml", "vllm/m.py", 1)
    assert edit.params == {"class": "C", "base": "B"}


@pytest.mark.parametrize("change, message", [
    (('op = "add_base"', 'op = "rename_class"'), "edit 'declare': unknown op 'rename_class'; use one of"),
    (('why = "because"\n', ''), "edit 'declare': missing provenance field 'why'"),
    (('remove_when = "upstream has it"\n', ''), "edit 'declare': missing provenance field 'remove_when'"),
    (('upstream = "https://github.com/vllm-project/vllm/pull/1"', 'upstream = "PR 1"'),
     "edit 'declare': field 'upstream' must be a PR/issue URL"),
    (('upstream = "https://github.com/vllm-project/vllm/pull/1"', 'upstream = "fork-only:  "'),
     "field 'upstream' must be"),
    (('base = "B"\n', ''), "edit 'declare': missing field 'base' required by op add_base"),
    (('base = "B"', 'base = "B"\nbases = "X"'), "edit 'declare': unknown field(s) ['bases']"),
    (('id = "declare"\n', ''), "edit #1: missing field 'id'"),
    (('op = "add_base"', 'op = "add_base"\nexpect = -1'), "field 'expect' must be a non-negative integer"),
    (('[[edit]]', '[edit]'), "no [[edit]] tables"),
    (('title = "[Bugfix] Declare B on C"', ''), "missing top-level 'title'"),
    (('id = "declare"', 'id = "declare"\nid = "again"'), "not valid TOML"),
])
def test_bad_spec_is_one_clear_line(tmp_path, change, message):
    path = _spec(tmp_path, GOOD.replace(*change))
    with pytest.raises(ForkError) as info:
        load_spec(path, tmp_path / "edits", tmp_path)
    text = str(info.value)
    assert "edits/vllm/m.py.toml" in text and message in text
    assert "\n" not in text


def test_duplicate_ids_and_stray_files_are_refused(tmp_path):
    _spec(tmp_path, GOOD + GOOD.split("\n", 1)[1])
    with pytest.raises(ForkError, match="edit id 'declare' is used twice"):
        load_all(tmp_path / "edits", tmp_path)
    (tmp_path / "edits" / "vllm" / "m.py.toml").unlink()
    _spec(tmp_path, "notes", name="vllm/README.md")
    with pytest.raises(ForkError, match=r"edits/vllm/README.md: spec files are named <upstream path>\.toml"):
        load_all(tmp_path / "edits", tmp_path)


def test_ensure_import_takes_only_zero_or_one(tmp_path):
    text = GOOD.replace('op = "add_base"\nclass = "C"\nbase = "B"',
                        'op = "ensure_import"\nmodule = "m"\nname = "B"\nexpect = 2')
    with pytest.raises(ForkError, match="ensure_import takes expect = 1"):
        load_spec(_spec(tmp_path, text), tmp_path / "edits", tmp_path)


def test_repository_specs_all_load_with_provenance(project):
    edits = project.edits()
    spec_files = sorted(p.relative_to(project.root / "edits") for p in (project.root / "edits").rglob("*.toml"))
    assert sorted({e.target for e in edits}) == sorted(str(p)[: -len(".toml")] for p in spec_files)
    assert {  # the three seeds stay covered
        "vllm/models/kimi_k3/amd/linear.py",
        "vllm/models/kimi_k3/nvidia/model.py",
        "vllm/model_executor/models/qwen3_next.py",
    } <= {e.target for e in edits}
    for edit in edits:
        assert edit.why and edit.remove_when
        assert edit.upstream.startswith(("https://", "fork-only:"))
