"""forktool's exit codes through the real CLI: 1 findings, 2 bad input, 3 our own internal error."""

from __future__ import annotations

import subprocess
import sys

from fork_testing import UPSTREAM_VERSION, run_forktool
from forktool.internals import INTERNALS_PATH
from forktool.project import REPO_ROOT
from forktool.vocabulary import Exit

PINNED = f"vllm=={UPSTREAM_VERSION}"

# Runs `python -m forktool ARGS` after making check_base raise: a bug of ours, as a user would meet it.
FAULTY = """
import runpy, sys
import forktool.check

def check_base(*args, **kwargs):
    raise RuntimeError("simulated bug\\nsecond line")

forktool.check.check_base = check_base
sys.argv = ["forktool", *sys.argv[1:]]
runpy.run_module("forktool", run_name="__main__")
"""


def _faulty(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FAULTY, *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_an_internal_error_is_exit_3_with_one_line():
    done = _faulty("check", "--base", PINNED)
    assert done.returncode == Exit.INTERNAL
    [line] = done.stderr.splitlines()
    assert line.startswith("forktool check: internal error: RuntimeError: simulated bug (at <string>:6;")
    assert line.endswith("rerun with --debug for the traceback)") and "Traceback" not in done.stderr


def test_debug_shows_the_traceback_of_an_internal_error():
    done = _faulty("--debug", "check", "--base", PINNED)
    assert done.returncode == Exit.INTERNAL
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert 'File "<string>", line 6, in check_base' in done.stderr


def test_a_missing_flag_is_bad_input():
    done = run_forktool("check")
    assert done.returncode == Exit.BAD_INPUT and "--base" in done.stderr


def test_a_malformed_spec_is_bad_input_not_a_finding(repo_copy):
    spec = repo_copy / "edits/vllm/models/kimi_k3/amd/linear.py.toml"
    spec.write_text(spec.read_text().replace('op = "add_base"', 'op = "add_bases"', 1))
    done = run_forktool("check", "--base", PINNED, repo=repo_copy)
    assert done.returncode == Exit.BAD_INPUT, done.stderr
    assert done.stderr.splitlines() == [
        "forktool check: edits/vllm/models/kimi_k3/amd/linear.py.toml: edit 'declare-supports-eagle3': unknown op "
        "'add_bases'; use one of: add_base, add_entry, add_literal_member, add_method, add_sibling, "
        "capture_aux_hidden_states, "
        "ensure_import, insert_statement, replace_expression"]


def test_a_malformed_internals_table_is_bad_input_before_any_download(repo_copy):
    (repo_copy / INTERNALS_PATH).write_text('[[internal]]\nmodule = "vllm.x"\nname = "_y"\nused_by = ["a.py"]\n')
    done = run_forktool("check", "--base", "vllm==9.9.9", repo=repo_copy)
    assert done.returncode == Exit.BAD_INPUT
    assert done.stderr.splitlines() == [f"forktool check: {INTERNALS_PATH}: internal #1: missing field 'why'"]



def test_build_json_reports_the_manifest_the_wheel_ships(tmp_path):
    import zipfile

    from forktool.cli import _shipped_manifest
    from forktool.manifest import MANIFEST_PATH, render

    data = {"fork_version": "0.33.0+fork", "edits": [{"id": "x", "status": "clean"}], "overlay": []}
    wheel = tmp_path / "fork.whl"
    with zipfile.ZipFile(wheel, "w") as out:
        out.writestr(MANIFEST_PATH, render(data))
    assert _shipped_manifest(wheel) == data
