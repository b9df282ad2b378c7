"""The edit ledger (docs/edit-ledger.md) is generated from edits/ and the series, and the committed page is current."""

from __future__ import annotations

import shutil

from forktool.cli import main
from forktool.ledger import LEDGER_PATH, render_ledger
from forktool.project import Project


def test_committed_ledger_is_the_generated_one(project):
    committed = (project.root / LEDGER_PATH).read_text(encoding="utf-8")
    assert committed == render_ledger(project), "docs/edit-ledger.md is stale: run `python -m forktool ledger`"


def test_ledger_lists_every_edit_once_under_its_pr_or_as_fork_only(project):
    text = render_ledger(project)
    edits = project.edits()
    for edit in edits:
        assert text.count(f"| `{edit.target}` | `{edit.id}` |") == 1, (edit.spec_file, edit.id)
    upstreamable, fork_only = text.split("\n## Fork-only\n")
    assert all(f"`{e.id}`" in (upstreamable if e.pr else fork_only) for e in edits)
    assert f"{len(edits)} edits in {len({e.spec_file for e in edits})} spec files" in text


def test_check_flags_a_stale_ledger_and_writing_makes_it_current(project, tmp_path, capsys):
    copy = tmp_path / "fork"
    for part in ("edits", "upstream-prs", "requirements", "pyproject.toml"):
        source = project.root / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / part)
    (copy / "docs").mkdir()
    (copy / LEDGER_PATH).write_text("# Edit ledger\n")
    assert main(["--repo", str(copy), "ledger", "--check"]) == 1
    assert "docs/edit-ledger.md is stale; run `python -m forktool ledger`" in capsys.readouterr().err
    assert main(["--repo", str(copy), "ledger"]) == 0
    assert main(["--repo", str(copy), "ledger", "--check"]) == 0
    assert (copy / LEDGER_PATH).read_text() == render_ledger(Project(copy))


def test_out_is_the_callers_path_and_check_names_it(project, tmp_path, capsys):
    out = tmp_path / "elsewhere" / "ledger.md"
    assert main(["--repo", str(project.root), "ledger", "--out", str(out)]) == 0
    assert out.read_text() == render_ledger(project) and f"wrote {out}" in capsys.readouterr().out
    out.write_text("stale\n")
    assert main(["--repo", str(project.root), "ledger", "--out", str(out), "--check"]) == 1
    assert f"forktool ledger: {out} is stale" in capsys.readouterr().err
