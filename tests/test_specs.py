"""Bad spec input stops with one line naming the spec file, the edit and what to do; upstreamable and fork-only
edits live apart, and every upstreamable spec names a PR of the series (and every PR has a spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forktool.errors import ForkError
from forktool.migrate import migrate_text
from forktool.series import check_series, load_series
from forktool.specs import load_all, load_spec


GOOD = '''# Declares B on C.
pr = "p"

[[edit]]
id = "declare"
op = "add_base"
class = "C"
base = "B"
why = "because"
upstream = "https://github.com/vllm-project/vllm/pull/1"
remove_when = "upstream has it"
'''

FORK_ONLY = GOOD.replace('pr = "p"\n', "").replace(
    'upstream = "https://github.com/vllm-project/vllm/pull/1"', 'upstream = "fork-only: stays here"')


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
     "edit 'declare': field 'upstream' must be a PR/issue URL (https://...) or 'new: <why"),
    (('upstream = "https://github.com/vllm-project/vllm/pull/1"', 'upstream = "new:  "'), "field 'upstream' must be"),
    (('upstream = "https://github.com/vllm-project/vllm/pull/1"', 'upstream = "fork-only: mine"'),
     "edit 'declare': says 'fork-only:' but edits/vllm/m.py.toml holds upstreamable edits; move it to "
     "edits/vllm/m.py.fork.toml"),
    (('base = "B"', 'base = "vllm._fork.B"'), "edit 'declare': uses vllm._fork, which never goes upstream; "
     "move it to edits/vllm/m.py.fork.toml"),
    (('why = "because"', 'why = "see vllm._fork.eagle3"'), "edit 'declare': uses vllm._fork"),
    (('pr = "p"\n', ''), "missing top-level 'pr' (the id of its entry in upstream-prs/series.toml); edits that "
     "stay in the fork go in edits/vllm/m.py.fork.toml"),
    (('pr = "p"', 'pr = 3'), "missing top-level 'pr'"),
    (('base = "B"', 'base = "B"\npr = ""'), "edit 'declare': field 'pr' names a series entry"),
    (('base = "B"\n', ''), "edit 'declare': missing field 'base' required by op add_base"),
    (('base = "B"', 'base = "B"\nbases = "X"'), "edit 'declare': unknown field(s) ['bases']"),
    (('id = "declare"\n', ''), "edit #1: missing field 'id'"),
    (('op = "add_base"', 'op = "add_base"\nexpect = -1'), "field 'expect' must be a non-negative integer"),
    (('[[edit]]', '[edit]'), "no [[edit]] tables"),
    (('# Declares B on C.', 'title = "Declare B"'), "unknown top-level key(s) ['title']; use [[edit]] tables (a PR "
     "takes its title from upstream-prs/series.toml; describe the file in a comment)"),
    (('pr = "p"', 'pr = "p"\nupstream = ""'), "top-level ['upstream'] must be non-empty strings"),
    (('id = "declare"', 'id = "declare"\nid = "again"'), "not valid TOML"),
])
def test_bad_spec_is_one_clear_line(tmp_path, change, message):
    path = _spec(tmp_path, GOOD.replace(*change))
    with pytest.raises(ForkError) as info:
        load_spec(path, tmp_path / "edits", tmp_path)
    text = str(info.value)
    assert "edits/vllm/m.py.toml" in text and message in text
    assert "\n" not in text


@pytest.mark.parametrize("imports", ['"from .interfaces import SupportsEagle3"', '["import torch"]',
                                     '["from .interfaces import *"]', '["from .interfaces import A as B"]'])
def test_imports_field_takes_from_imports_only(tmp_path, imports):
    spec = _spec(tmp_path, GOOD.replace('base = "B"\n', f'base = "B"\nimports = {imports}\n'))
    with pytest.raises(ForkError, match=r"edit 'declare': field 'imports' must be a list of 'from <module> import"):
        load_spec(spec, tmp_path / "edits", tmp_path)


def test_imports_field_names_module_and_name_pairs(tmp_path):
    spec = _spec(tmp_path, GOOD.replace('base = "B"\n', 'base = "B"\nimports = ["from .interfaces import A, B"]\n'))
    [edit] = load_spec(spec, tmp_path / "edits", tmp_path)
    assert edit.imports == ((".interfaces", "A"), (".interfaces", "B"))


def test_file_level_provenance_is_each_edits_default(tmp_path):
    two = GOOD.replace('upstream = "https://github.com/vllm-project/vllm/pull/1"\n', "").replace(
        'pr = "p"\n', 'pr = "p"\nupstream = "https://github.com/vllm-project/vllm/pull/2"\n')
    two += '\n[[edit]]\nid = "own"\nop = "add_base"\nclass = "D"\nbase = "B"\nwhy = "too"\n'
    two += 'upstream = "https://github.com/vllm-project/vllm/pull/3"\nremove_when = "upstream has it"\n'
    first, second = load_spec(_spec(tmp_path, two), tmp_path / "edits", tmp_path)
    assert (first.upstream, second.upstream) == ("https://github.com/vllm-project/vllm/pull/2",
                                                 "https://github.com/vllm-project/vllm/pull/3")
    # The default is checked as the edit's own field would be: a fork-only tag in an upstreamable file is refused.
    wrong = two.replace('upstream = "https://github.com/vllm-project/vllm/pull/2"', 'upstream = "fork-only: x"')
    with pytest.raises(ForkError, match="edit 'declare': says 'fork-only:'"):
        load_spec(_spec(tmp_path, wrong), tmp_path / "edits", tmp_path)


def test_duplicate_ids_and_stray_files_are_refused(tmp_path):
    _spec(tmp_path, GOOD + GOOD.split("\n", 1)[1])
    with pytest.raises(ForkError, match="edit id 'declare' is used twice"):
        load_all(tmp_path / "edits", tmp_path)
    (tmp_path / "edits" / "vllm" / "m.py.toml").unlink()
    _spec(tmp_path, "notes", name="vllm/README.md")
    with pytest.raises(ForkError, match=r"edits/vllm/README.md: spec files are named <upstream path>\.toml or"):
        load_all(tmp_path / "edits", tmp_path)


def test_ensure_import_takes_only_zero_or_one(tmp_path):
    text = GOOD.replace('op = "add_base"\nclass = "C"\nbase = "B"',
                        'op = "ensure_import"\nmodule = "m"\nname = "B"\nexpect = 2')
    with pytest.raises(ForkError, match="ensure_import takes expect = 1"):
        load_spec(_spec(tmp_path, text), tmp_path / "edits", tmp_path)


def test_repository_specs_all_load_with_provenance(project):
    edits = project.edits()
    spec_files = sorted(p.relative_to(project.root / "edits") for p in (project.root / "edits").rglob("*.toml"))
    assert sorted({e.target for e in edits}) == sorted({str(p).removesuffix(".toml").removesuffix(".fork")
                                                        for p in spec_files})
    # The three reported startup crashes (Qwen3-Next, Kimi-K3 on ROCm and CUDA) stay covered: ROCm by this edit;
    # Qwen3-Next and CUDA Kimi-K3 declare SupportsEagle3 upstream (since 0.33.0), and their guard edits gave way
    # at 0.34.0 to the registry-wide audit (test_audit_real.py::test_reported_classes_on_upstream_and_fork).
    assert ("vllm/models/kimi_k3/amd/linear.py", "declare-supports-eagle3") in {(e.target, e.id) for e in edits}
    series = {pr.id for pr in project.series()}
    for edit in edits:
        assert edit.why and edit.remove_when
        if edit.fork_only:
            assert edit.spec_file.endswith(".fork.toml") and edit.upstream.startswith("fork-only:")
        else:
            assert edit.upstream.startswith(("https://", "new:")) and edit.pr in series
            assert not any("vllm._fork" in v for v in edit.params.values())


def test_fork_only_spec_file(tmp_path):
    [edit] = load_spec(_spec(tmp_path, FORK_ONLY, "vllm/m.py.fork.toml"), tmp_path / "edits", tmp_path)
    assert (edit.target, edit.fork_only, edit.pr) == ("vllm/m.py", True, None)
    for text, message in [
        (FORK_ONLY.replace('"fork-only: stays here"', '"https://github.com/vllm-project/vllm/pull/1"'),
         "edit 'declare': field 'upstream' must be 'fork-only: <reason>' in a .fork.toml file; an upstreamable "
         "edit goes in edits/vllm/m.py.toml"),
        ('pr = "p"\n' + FORK_ONLY, "unknown top-level key(s) ['pr']"),
        (FORK_ONLY.replace('base = "B"', 'base = "B"\npr = "p"'), "edit 'declare': field 'pr' names a series"),
    ]:
        with pytest.raises(ForkError) as info:
            load_spec(_spec(tmp_path, text, "vllm/m.py.fork.toml"), tmp_path / "edits", tmp_path)
        assert str(info.value).startswith("edits/vllm/m.py.fork.toml: ") and message in str(info.value)


def test_upstreamable_edits_come_before_fork_only_ones_of_the_same_file(tmp_path):
    _spec(tmp_path, FORK_ONLY.replace('id = "declare"', 'id = "mine"'), "vllm/m.py.fork.toml")
    _spec(tmp_path, GOOD.replace('[[edit]]', '[[edit]]\npr = "q"', 1))
    _spec(tmp_path, GOOD, "vllm/l.py.toml")
    edits = load_all(tmp_path / "edits", tmp_path)
    assert [(e.target, e.id, e.pr) for e in edits] == [
        ("vllm/l.py", "declare", "p"), ("vllm/m.py", "declare", "q"), ("vllm/m.py", "mine", None)]


SERIES = '''[[pr]]
id = "p"
title = "[Bugfix] Declare B on C"
body = "C already captures."
tests = ["tests/test_p.py"]
'''


def _series(tmp_path: Path, text: str, tests=("tests/test_p.py",)):
    (tmp_path / "upstream-prs").mkdir(exist_ok=True)
    (tmp_path / "upstream-prs" / "series.toml").write_text(text)
    for test in tests:
        (tmp_path / "upstream-prs" / test).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "upstream-prs" / test).write_text("def test_p():\n    pass\n")


def test_series_and_specs_name_each_other(tmp_path):
    _series(tmp_path, SERIES)
    [pr] = load_series(tmp_path)
    assert (pr.id, pr.tests, pr.depends_on) == ("p", ("tests/test_p.py",), ())
    edits = load_spec(_spec(tmp_path, GOOD), tmp_path / "edits", tmp_path)
    check_series([pr], edits)
    with pytest.raises(ForkError, match=r"^edits/vllm/m.py.toml: edit 'declare': pr 'q' is not an entry of "
                                        r"upstream-prs/series.toml"):
        check_series([pr], load_spec(_spec(tmp_path, GOOD.replace('pr = "p"', 'pr = "q"')), tmp_path / "edits",
                                     tmp_path))
    with pytest.raises(ForkError, match=r"^upstream-prs/series.toml: pr 'p' has no edits \(no edits/\*\*.toml "
                                        r"names it with pr = \"p\"\)"):
        check_series([pr], [])


@pytest.mark.parametrize("change, message", [
    (('tests = ["tests/test_p.py"]', 'tests = ["tests/test_q.py"]'),
     "pr 'p': test tests/test_q.py is not a file at upstream-prs/tests/test_q.py"),
    (('tests = ["tests/test_p.py"]', 'tests = []'), "pr 'p': field 'tests' lists"),
    (('body = "C already captures."\n', ''), "pr 'p': missing field 'body'"),
    (('id = "p"', 'id = "p"\ndepends_on = ["later"]'), "pr 'p': depends on 'later', which is not an earlier"),
    (('id = "p"', 'id = "p"\nfiles = []'), "pr 'p': unknown field(s) ['files']"),
])
def test_bad_series_entry_is_one_line(tmp_path, change, message):
    _series(tmp_path, SERIES.replace(*change))
    with pytest.raises(ForkError) as info:
        load_series(tmp_path)
    assert str(info.value).startswith("upstream-prs/series.toml: ") and message in str(info.value)


def test_migration_of_an_old_schema_spec(tmp_path):
    old = GOOD.replace('pr = "p"\n', "").replace('"https://github.com/vllm-project/vllm/pull/1"',
                                                    '"fork-only: found by the audit"')
    with pytest.raises(ForkError, match="missing top-level 'pr'"):
        load_spec(_spec(tmp_path, old), tmp_path / "edits", tmp_path)
    [edit] = load_spec(_spec(tmp_path, migrate_text(old, "p")), tmp_path / "edits", tmp_path)
    assert (edit.pr, edit.upstream) == ("p", "new: found by the audit")
    with pytest.raises(ValueError, match="uses vllm._fork"):
        migrate_text(old.replace('base = "B"', 'base = "vllm._fork.B"'), "p")
