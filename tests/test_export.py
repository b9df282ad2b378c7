"""`export-pr`: the series of upstream-prs/series.toml applies to the pinned sdist and passes its own hooks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import sdist_hooks
import yaml
from conftest import SIGNOFF, run_forktool
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
TEST_LOCK = REPO_ROOT / "requirements" / "test.txt"


def _mypy_key(work: Path, touched: list[str], site: bool, patched: bool) -> str:
    """Everything a mypy run's errors depend on: the sdist, the touched files' contents (patched or not), the
    hook environment, the packages it sees, the hook script and this file's comparison."""
    texts = [(t, (work / t).read_text() if patched and (work / t).is_file() else None) for t in touched]
    return resultcache.key("mypy-hook", (REPO_ROOT / "requirements" / "upstream.txt").read_text(), texts, site, (REPO_ROOT / "requirements" /
                           "upstream-hooks.txt").read_text(), TEST_LOCK.read_text() if site else "",
                           (work / "tools/pre_commit/mypy.py").read_text(),
                           Path(sdist_hooks.__file__).read_text())


def _mypy(work: Path, hook: dict, touched: list[str], site: bool, patched: bool, tmp: Path) -> str:
    entry = _mypy_key(work, touched, site, patched)
    cached = resultcache.load("mypy-hook", entry)
    if cached is not None:
        return cached
    where = work
    if not patched:  # the same paths at the base commit, in a worktree of the checkout
        where = tmp / "base"
        base = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=work, capture_output=True,
                              text=True, check=True).stdout.strip()
        if not where.exists():
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(where), base], cwd=work, check=True)
    files = [t for t in touched if (where / t).is_file() and t.endswith((".py", ".pyi"))]
    cache = fetch.cache_root() / "mypy" / ("site" if site else "hook")
    with FileLock(f"{cache}.lock"):
        output = sdist_hooks.run_mypy(hook, files, where, HOOKS_VENV, cache,
                                      Path(sys.executable) if site else None)
    resultcache.store("mypy-hook", entry, output)
    return output


def test_series_passes_every_offline_hook_of_the_sdist(series_checkout, tmp_path):
    """Every hook of the sdist's .pre-commit-config.yaml that runs offline, on every touched file; mypy with no
    error the unpatched tree does not have, without and with torch installed."""
    work, touched = series_checkout
    assert (HOOKS_VENV / "mypy").exists(), "run `make hooks-env` (the sdist's hook environment)"
    config = (work / ".pre-commit-config.yaml").read_text()
    assert pinned_ruff(REPO_ROOT) == re.search(r"ruff-pre-commit\n\s+rev: v(\S+)", config).group(1)
    typos = subprocess.run([Path(sys.executable).parent / "typos", "--version"], capture_output=True, text=True)
    assert typos.stdout.split()[-1] == re.search(r"crate-ci/typos\n\s+rev: v(\S+)", config).group(1)
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
            for site in (False, True):
                new = sdist_hooks.new_errors(_mypy(work, hook, touched, site, False, tmp_path),
                                             _mypy(work, hook, touched, site, True, tmp_path))
                if new:
                    failures.append(f"mypy ({'with' if site else 'without'} torch): " + "\n".join(new))
            continue
        done = sdist_hooks.run_hook(hook, files, work, HOOKS_VENV)
        if done.returncode != 0:
            failures.append(f"{hook['id']}: {done.stdout[-2000:]}{done.stderr[-1000:]}")
    assert not failures, "\n\n".join(failures)
    assert {"ruff-check", "ruff-format", "typos", "mypy", "check-test-tethering", "check-spdx-header",
            "check-forbidden-imports", "check-torch-cuda-call", "check-filenames"} <= set(ran), ran


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


# What each PR's test reports on stock 0.33.0: the defect its PR fixes, not a broken test (one entry per PR).
DEFECTS = (
    "has no attribute 'image_token_index'",  # eagle3-drafter-audio-only
    "ModelWithoutEagle3 does not declare SupportsEagle3",  # eagle3-interface-error
    "MiMoForCausalLM: forward dropped the aux hidden states",  # eagle3-declared-capture
    "Glm4ForCausalLM lacks SupportsEagle3",  # eagle3-declarations
    "Glm4MoeForCausalLM does not declare SupportsEagle3",  # eagle3-capture-glm4-moe
    "MixtralForCausalLM does not declare SupportsEagle3",  # eagle3-capture-moe
    "Ernie4_5_MoeForCausalLM does not declare SupportsEagle3",  # eagle3-capture-ernie45
    "Step3TextForCausalLM does not declare SupportsEagle3",  # eagle3-capture-step3
    "LongcatFlashForCausalLM does not declare SupportsEagle3",  # eagle3-capture-longcat
    "BailingMoeForCausalLM does not declare SupportsEagle3",  # eagle3-capture-bailing
    "CohereForCausalLM does not declare SupportsEagle3",  # eagle3-capture-cohere
    "GraniteMoeHybridForCausalLM does not declare SupportsEagle3",  # eagle3-capture-granite
    "FalconH1ForCausalLM does not declare SupportsEagle3",  # eagle3-capture-hybrid
    "HYV3ForCausalLM does not declare SupportsEagle3",  # eagle3-capture-recent
    "GemmaForCausalLM does not declare SupportsEagle3",  # eagle3-capture-long-tail
    "assert 'glm5_next_text' == 'glm5_next_mtp'",  # glm5-mtp-text-only
    "has no attribute 'num_nextn_predict_layers'",  # glm5-mtp-multi-layer
    "vllm/models/glm5next/common/model.py",  # glm5-mtp-no-indexer
    "[type=literal_error, input_value='dflash2'",  # dflash2-alias
)


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
    for defect in DEFECTS:
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
