"""`export-pr`: the series of upstream-prs/series.toml applies to the pinned sdist and passes its own hooks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import sdist_hooks
import yaml
from fork_testing import SIGNOFF, run_forktool
from filelock import FileLock
from forktool import fetch, resultcache
from forktool.export import export_series
from forktool.format import SETTINGS, pinned_ruff
from forktool.project import REPO_ROOT
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


HOOKS_VENV = REPO_ROOT / ".venv-hooks" / "bin"
LOCKS = REPO_ROOT / "requirements"


def _git(work: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=work, capture_output=True, text=True, check=True).stdout.strip()


def _mypy(hook: dict, work: Path, commit: str, role: str, touched: list[str], site: bool, tmp: Path) -> str:
    """The hook's output on the checkout at `commit`, from the result cache when nothing that decides it changed:
    the commit's tree (every file mypy can read, the hook script and its settings; git names it by content), the
    checked files, the hook environment, with torch the test environment, and how the hook is run here."""
    files = [f for f in _git(work, "ls-tree", "-r", "--name-only", commit, "--", *touched).splitlines()
             if f.endswith((".py", ".pyi"))]
    entry = resultcache.key("mypy-hook", _git(work, "rev-parse", f"{commit}^{{tree}}"), files,
                            (LOCKS / "upstream-hooks.txt").read_text(), (HOOKS_VENV.parent / "pyvenv.cfg").read_text(),
                            [(LOCKS / "test.txt").read_text(), sys.version] if site else None,
                            Path(sdist_hooks.__file__).read_text())
    cached = resultcache.load("mypy-hook", entry)
    if cached is not None:
        return cached
    tree = tmp / commit
    if not tree.exists():  # the checkout at that commit, beside it
        _git(work, "worktree", "add", "-q", "--detach", str(tree), commit)
    # mypy's own cache, one per environment and tree (base, series): alternating two trees in one cache would
    # re-check every module that imports a touched one on each run.
    cache = fetch.cache_root() / "mypy" / f"{'site' if site else 'hook'}-{role}"
    with FileLock(f"{cache}.lock"):
        output = sdist_hooks.run_mypy(hook, files, tree, HOOKS_VENV, cache, Path(sys.executable) if site else None)
    resultcache.store("mypy-hook", entry, output)
    return output


def _new_mypy_errors(work: Path, touched: list[str], tmp: Path, site: bool) -> list[str]:
    """mypy's errors on the series that the same paths at the base commit (the sdist as released) lack."""
    hook = next(h for h in sdist_hooks.hooks(work) if h["id"] == "mypy")
    base, head = _git(work, "rev-list", "--max-parents=0", "HEAD"), _git(work, "rev-parse", "HEAD")
    return sdist_hooks.new_errors(_mypy(hook, work, base, "base", touched, site, tmp),
                                  _mypy(hook, work, head, "series", touched, site, tmp))


def _hook_rev(config: str, repo: str) -> str:
    """The version a hook repository is pinned at: `rev: vX` (0.33.0) or a commit `# frozen: vX` (0.34.0)."""
    return re.search(repo + r"\n\s+rev: (?:v|\S+\s+# frozen: v)(\S+)", config).group(1)


def test_series_passes_every_offline_hook_of_the_sdist(series_checkout, tmp_path):
    """Every hook of the sdist's .pre-commit-config.yaml that runs offline, on every touched file; mypy as the
    hook runs it (its own environment, no torch) with no error the unpatched tree does not have."""
    work, touched = series_checkout
    assert (HOOKS_VENV / "mypy").exists(), "run `make hooks-env` (the sdist's hook environment)"
    config = (work / ".pre-commit-config.yaml").read_text()
    assert pinned_ruff(REPO_ROOT) == _hook_rev(config, "astral-sh/ruff-pre-commit")
    typos = subprocess.run([Path(sys.executable).parent / "typos", "--version"], capture_output=True, text=True)
    assert typos.stdout.split()[-1] == _hook_rev(config, "crate-ci/typos")
    assert _hook_mypy_version() in config  # the hook environment's mypy is the one the config pins
    exclude = yaml.safe_load(config).get("exclude", "^$")
    failures, ran = [], []
    for hook in sdist_hooks.hooks(work):
        files = [t for t in touched if sdist_hooks.applies(hook, t, exclude)]
        if hook["id"] in sdist_hooks.NOT_FILE_HOOKS:
            continue
        if hook["id"] in sdist_hooks.OFFLINE_UNAVAILABLE:
            assert not files, f"hook {hook['id']} applies to {files} but cannot run here: " \
                              f"{sdist_hooks.OFFLINE_UNAVAILABLE[hook['id']]}"
            continue
        if not files and not hook.get("always_run"):
            continue
        ran.append(hook["id"])
        if hook["id"] == "mypy":
            new = _new_mypy_errors(work, touched, tmp_path, site=False)
            failures += ["mypy: " + "\n".join(new)] if new else []
            continue
        done = sdist_hooks.run_hook(hook, files, work, HOOKS_VENV)
        if done.returncode != 0:
            failures.append(f"{hook['id']}: {done.stdout[-2000:]}{done.stderr[-1000:]}")
    assert not failures, "\n\n".join(failures)
    assert {"ruff-check", "ruff-format", "typos", "mypy", "check-test-tethering", "check-spdx-header",
            "check-forbidden-imports", "check-torch-cuda-call", "check-filenames"} <= set(ran), ran


@pytest.mark.mypy_torch
def test_series_adds_no_mypy_error_with_torch_installed(series_checkout, tmp_path):
    """mypy as a developer's editor runs it, with torch and transformers installed (`make hooks-mypy-torch`;
    upstream's hook environment has no torch, so this is not upstream's gate)."""
    work, touched = series_checkout
    assert (HOOKS_VENV / "mypy").exists(), "run `make hooks-env` (the sdist's hook environment)"
    new = _new_mypy_errors(work, touched, tmp_path, site=True)
    assert not new, "\n".join(new)


def _hook_mypy_version() -> str:
    done = subprocess.run([HOOKS_VENV / "mypy", "--version"], capture_output=True, text=True)
    return "mypy==" + done.stdout.split()[1]


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


# What each PR test reports on stock 0.34.0, per test function ("file::function"): the defect its PR fixes, not a
# broken test. Every case of the function must fail, and the message pytest's short summary keeps for it (the
# exception's first line) must contain the string.
DEFECTS = {
    "test_eagle3_interface_error.py::test_error_names_the_model_class":
        "ModelWithoutEagle3 does not implement SupportsEagle3",
    "test_rocm_kimi_linear_eagle3.py::test_rocm_kimi_linear_declares_supports_eagle3":
        "the ROCm/XPU KimiLinearForCausalLM lacks SupportsEagle3",
    "test_eagle3_declarations.py::test_qwen2_audio_declares_supports_eagle3":
        "Qwen2AudioForConditionalGeneration lacks SupportsEagle3",
    "test_glm5next_recoverssm.py::test_glm5next_takes_recoverssm_with_speculative_decoding":
        "Glm5NextForCausalLM does not declare SupportsReplaySSM",
}


STOCK_RUN = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEp", "--tb=line"]
COLUMNS = "400"  # wide enough that the short summary keeps each failure's message whole
_OUTCOME = re.compile(r"^(FAILED|ERROR|PASSED) (\S+?\.py)::(\w+)(?:\[(.*?)\])?(?: - (.*))?$", re.MULTILINE)


def _stock_run_key(project, tests: list[str]) -> str:
    """Everything the stock run's report depends on: the pinned wheel, every file under upstream-prs/tests, the
    pytest settings, the test environment (lock and Python) and the command."""
    tests_dir = project.root / TESTS_ROOT / "tests"
    files = [(p.relative_to(tests_dir).as_posix(), p.read_bytes().hex()) for p in sorted(tests_dir.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts]
    return resultcache.key("pr-tests-on-stock", sorted(project.pin.hashes), files,
                           (project.root / "pyproject.toml").read_text(), (LOCKS / "test.txt").read_text(),
                           sys.version, STOCK_RUN, COLUMNS, tests)


def _assert_each_fails_for_its_defect(stdout: str, tests: list[str]) -> None:
    assert "vllm/_fork" not in stdout  # really stock: the fork's overlay is not on the path
    outcomes = [(kind, f"{Path(file).name}::{function}", case or "", why or "")
                for kind, file, function, case, why in _OUTCOME.findall(stdout)]
    assert {Path(t).name for t in tests} == {key.split("::")[0] for key in DEFECTS}, "DEFECTS and the series differ"
    passed = [f"{key}[{case}]" for kind, key, case, _ in outcomes if kind == "PASSED"]
    assert not passed, f"pass on stock, so they show no defect: {passed}"
    assert {key for _, key, _, _ in outcomes} == set(DEFECTS), stdout[-3000:]
    # Each case fails on the defect its own test function names, not on a broken test or another test's defect.
    wrong = [(key, case, why) for kind, key, case, why in outcomes if DEFECTS[key] not in why]
    assert not wrong, wrong


def test_pr_tests_fail_on_stock(stock_python, project, tmp_path):
    """Each PR's test fails on stock 0.34.0 (the pinned wheel's Python files first on sys.path), for its defect.
    A report that passed is kept in the result cache, keyed by everything it depends on."""
    tests = [t for pr in project.series() for t in pr.tests if Path(t).name.startswith("test_")]
    entry = _stock_run_key(project, tests)
    cached = resultcache.load("pr-tests-on-stock", entry)
    if cached is not None:
        _assert_each_fails_for_its_defect(cached, tests)
        return
    # No third-party pytest plugins: the PR tests use none, and loading them costs every run a second or two.
    env = dict(os.environ, PYTHONPATH=str(stock_python), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", COLUMNS=COLUMNS)
    command = [sys.executable, *STOCK_RUN, "--rootdir", str(project.root),
               *[str(project.root / TESTS_ROOT / t) for t in tests]]
    stdout = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    _assert_each_fails_for_its_defect(stdout, tests)
    resultcache.store("pr-tests-on-stock", entry, stdout)


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


def _stock_report(defects: dict[str, str]) -> tuple[str, list[str]]:
    """A stock report in which every test function fails once, with its own defect (case "x")."""
    lines = [f"FAILED upstream-prs/tests/v1/x/{key}[x] - Error: {defect}"
             for key, defect in defects.items()]
    return "\n".join(lines) + "\n", sorted({f"tests/v1/x/{key.split('::')[0]}" for key in defects})


def test_each_test_function_must_fail_for_its_own_defect():
    report, tests = _stock_report(DEFECTS)
    _assert_each_fails_for_its_defect(report, tests)
    first, second = list(DEFECTS)[:2]
    # A second case of the first function fails with the second function's defect: that does not count.
    swapped = report + f"FAILED upstream-prs/tests/v1/x/{first}[y] - Error: {DEFECTS[second]}\n"
    with pytest.raises(AssertionError):
        _assert_each_fails_for_its_defect(swapped, tests)


def test_a_test_that_passes_on_stock_is_refused():
    report, tests = _stock_report(DEFECTS)
    report += f"PASSED upstream-prs/tests/v1/x/{next(iter(DEFECTS))}[other]\n"
    with pytest.raises(AssertionError, match="pass on stock"):
        _assert_each_fails_for_its_defect(report, tests)
