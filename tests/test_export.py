"""`export-pr`: the series of upstream-prs/series.toml applies to the pinned sdist and passes its own hooks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import SIGNOFF, run_forktool
from forktool.export import export_series
from forktool.format import SETTINGS, pinned_ruff
from forktool.series import TESTS_ROOT


def _patches(out: Path) -> list[Path]:
    return sorted(out.glob("*.patch"))


def test_one_patch_per_pr_in_series_order_with_tests_and_signoff(exported_series, project):
    done, out = exported_series
    assert done.returncode == 0, done.stderr
    series = project.series()
    upstreamable = [e for e in project.edits() if not e.fork_only]
    assert [p.name for p in _patches(out)] == [f"{i:04d}-{pr.id}.patch" for i, pr in enumerate(series, 1)]
    for patch, pr in zip(_patches(out), series):
        text = patch.read_text()
        assert f"From: {SIGNOFF}\n" in text and text.count(f"\nSigned-off-by: {SIGNOFF}\n") == 1
        assert f"] {pr.title}\n" in text and pr.body.splitlines()[0] in text
        assert "vllm._fork" not in text and "vllm/_fork" not in text
        for test in pr.tests:  # our own test, as a new file at upstream's path
            assert f"--- /dev/null\n+++ b/{test}\n" in text
        touched = set(re.findall(r"^\+\+\+ b/(\S+)", text, re.MULTILINE)) - set(pr.tests)
        assert touched <= {e.target for e in upstreamable if e.pr == pr.id}
    exported = {t for p in _patches(out) for t in re.findall(r"^\+\+\+ b/(vllm/\S+)", p.read_text(), re.MULTILINE)}
    # Every upstreamable file that differs from upstream is in the series (absorbed guards give nothing).
    absorbed = {"vllm/model_executor/models/qwen3_next.py", "vllm/models/kimi_k3/nvidia/model.py"}
    assert exported == {e.target for e in upstreamable} - absorbed


def test_series_is_deterministic(exported_series, project, upstream_wheel, tmp_path):
    _, out = exported_series
    again = export_series(project, upstream_wheel[0], tmp_path / "again", SIGNOFF)
    assert [p.name for p in again] == [p.name for p in _patches(out)]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(again, _patches(out)))


def test_series_passes_the_sdists_own_hooks(series_checkout):
    """ruff check, ruff format and typos as the sdist's pre-commit config runs them, on every touched file."""
    work, touched = series_checkout
    hooks = (work / ".pre-commit-config.yaml").read_text()
    ruff_rev = re.search(r"ruff-pre-commit\n\s+rev: v(\S+)", hooks).group(1)
    typos_rev = re.search(r"crate-ci/typos\n\s+rev: v(\S+)", hooks).group(1)
    assert pinned_ruff(Path(__file__).parent.parent) == ruff_rev
    bin_dir = Path(sys.executable).parent
    version = subprocess.run([bin_dir / "typos", "--version"], capture_output=True, text=True).stdout
    assert version.split()[-1] == typos_rev
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *touched], cwd=work,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    fmt = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *touched], cwd=work,
                         capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout
    typos = subprocess.run([bin_dir / "typos", "--force-exclude", *touched], cwd=work, capture_output=True,
                           text=True)
    assert typos.returncode == 0, typos.stdout


def test_format_settings_are_the_sdists(series_checkout, project):
    """requirements/upstream-ruff.toml holds exactly the sdist's layout settings (its lint rules are run above)."""
    work, _ = series_checkout
    sdist = tomllib.loads((work / "pyproject.toml").read_text())
    ruff = sdist["tool"]["ruff"]
    ours = tomllib.loads((project.root / SETTINGS).read_text())
    assert ours["format"] == ruff.get("format")
    assert ours["line-length"] == ruff.get("line-length", 88)
    assert "isort" not in ruff.get("lint", {})  # isort runs with ruff's defaults there, as here
    assert sdist["project"]["requires-python"].startswith(">=3.11") and ours["target-version"] == "py311"


def test_series_result_is_the_forks_file(series_checkout, project, fork_sources):
    """Where the fork adds nothing fork-only, the sdist with the series applied has the wheel's exact bytes."""
    work, touched = series_checkout
    fork_only = {e.target for e in project.edits() if e.fork_only}
    fork = fork_sources.assembled  # the session's one assembly of the fork over the pinned wheel
    compared = [t for t in touched if t.startswith("vllm/") and t not in fork_only]
    assert compared and all((work / t).read_text() == fork.changed[t] for t in compared)


def test_pr_tests_fail_on_stock(stock_python, project, tmp_path):
    """Each PR's test fails on stock 0.33.0 (the pinned wheel's Python files first on sys.path)."""
    env = dict(os.environ, PYTHONPATH=str(stock_python))
    tests = [str(project.root / TESTS_ROOT / t) for pr in project.series() for t in pr.tests]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=line",
                           "--rootdir", str(project.root), *tests], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert "vllm/_fork" not in done.stdout  # really stock: the fork's overlay is not on the path
    failing = set(re.findall(r"^(?:FAILED|ERROR) (\S+?\.py)", done.stdout, re.MULTILINE))
    assert {Path(f).name for f in failing} == {Path(t).name for t in tests}, done.stdout[-3000:]
    # Each fails on the defect its PR fixes, not on a broken test.
    for defect in ("lacks SupportsEagle3", "does not declare SupportsEagle3", "has no attribute 'image_token_index'",
                   "in 'Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested'",
                   "assert 'glm5_next_text' == 'glm5_next_mtp'", "has no attribute 'num_nextn_predict_layers'",
                   "vllm/models/glm5next/common/model.py", "[type=literal_error, input_value='dflash2'",
                   "Target model does not have 'model' attribute",
                   "assert None == (1, 3, 5)", "assert None == 1",
                   "all groups must have the same block size",
                   "assert <CUDAGraphMode.FULL: 2> != <CUDAGraphMode.FULL: 2>",
                   "Failed: DID NOT RAISE <class 'ValueError'>"):
        assert defect in done.stdout, defect


def test_missing_signoff_is_bad_input(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FORKTOOL_SIGNOFF"}
    env.update(HOME=str(tmp_path), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               XDG_CONFIG_HOME=str(tmp_path))
    done = run_forktool("export-pr", "--out", str(tmp_path / "pr"), env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().startswith("forktool export-pr: no identity for Signed-off-by: set FORKTOOL_SIGNOFF=")
    assert not (tmp_path / "pr").exists()
    env["FORKTOOL_SIGNOFF"] = "just a name"
    done = run_forktool("export-pr", "--out", str(tmp_path / "pr"), env=env)
    assert done.returncode == 2 and "is not 'Name <email>'" in done.stderr


def test_ruff_is_pinned_alike_and_required(project, monkeypatch):
    """The build's ruff: one version in every install route; without it the build stops saying what to install."""
    import forktool.format as fmt

    version = pinned_ruff(project.root)
    assert f"ruff=={version}\n" in (project.root / "requirements/test.txt").read_text()
    assert f'"ruff=={version}"' in (project.root / "pyproject.toml").read_text()
    monkeypatch.setattr(fmt, "_ruff_binary", lambda: None)
    try:
        fmt.format_sources(project.root, [{"vllm/x.py": "x = 1\n"}], [])
    except fmt.ForkError as exc:
        assert str(exc) == f"ruff {version} is needed to format edited files (found none): " \
                           "pip install -r requirements/engine.txt"
    else:
        raise AssertionError("formatting without ruff did not stop")
