"""`make gpu-dry-run` on this CPU: every gpu-check scenario up to the first CUDA kernel, plus the two old blockers.

One interpreter runs every scenario (≈ 25 s here), then a dense scenario after an MoE one and an MoE scenario after
a dense one again; the test reads its lines and its JSON report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpu_scenarios
from vllm._fork.kv_pages import pools_proven

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, list]:
    out = tmp_path_factory.mktemp("gpu-dry-run") / "report.json"
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_dry_run.py"), "--blockers", *RERUNS, "--json",
                           str(out)], capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text()) if out.exists() else {"scenarios": {}, "reruns": []}
    return done, report["scenarios"], report["reruns"]


# After the blockers (GLM, MoE): a dense scenario, then an MoE one after it.
RERUNS = ["--rerun", "constructed-draft-model", "--rerun", "glm5-text-mtp1"]


def _lines(done) -> dict[str, str]:
    prefix = "scenario "
    return dict(line[len(prefix):].split(": ", 1) for line in done.stdout.splitlines() if line.startswith(prefix))


def test_every_gpu_scenario_passes_the_dry_run(dry_run):
    done, report, _ = dry_run
    lines = _lines(done)
    assert set(lines) == {s.name for s in gpu_scenarios.SCENARIOS + gpu_scenarios.BLOCKERS}, done.stderr[-3000:]
    for scenario in gpu_scenarios.SCENARIOS:
        assert lines[scenario.name] == "dry-run ok", (scenario.name, lines[scenario.name])


def test_the_two_startup_blockers_fail_with_their_reason(dry_run):
    done, _, _ = dry_run
    lines = _lines(done)
    assert done.returncode == 1  # the blockers are failures
    assert lines["blocker-mm-processor-without-tokenizer"].startswith("dry-run FAILED: ValueError: ")
    assert "requires a tokenizer" in lines["blocker-mm-processor-without-tokenizer"]
    assert lines["blocker-indexer-head-32"] == ("dry-run FAILED: Indexer.forward asserts `self.head_dim == 128 and "
                                                "self.quant_block_size == 128` (model.layers.3.self_attn.indexer)")


def test_glm_targets_pick_the_production_sparse_mla_kernel(dry_run):
    _, report, _ = dry_run
    for scenario in gpu_scenarios.SCENARIOS:
        if scenario.target.startswith("glm5"):
            assert "FLASHINFER_MLA_SPARSE_SM90" in report[scenario.name]["backends"]["target"], scenario.name
            assert "FLASH_ATTN_MLA_SPARSE" not in report[scenario.name]["backends"]["target"], scenario.name


def test_the_engine_planner_packs_exactly_the_packed_scenarios(dry_run):
    _, report, _ = dry_run
    for scenario in gpu_scenarios.SCENARIOS:
        plans = report[scenario.name]["plan"], report[scenario.name]["plan_packing_off"]
        ours, stock = ([g["block_size"] for g in plan["groups"] if g["draft"]] for plan in plans)
        if scenario.packed:  # DFlash2 without prefix caching: the draft window group takes 2x the tokens per block
            assert ours == [2 * stock[0]] and len(stock) == 1, (scenario.name, ours, stock)
        else:
            assert ours == stock, scenario.name
    # Prefix caching on: the drafter's window still gets a group of its own, at the pool's block size.
    assert [g["block_size"] for g in report["glm5-text-dflash2-prefix-cache"]["plan"]["groups"] if g["draft"]] == [640]


def test_the_speculator_the_runner_would_build(dry_run):
    _, report, _ = dry_run
    assert report["glm5-text-mtp1"]["speculator"] == "MTPSpeculator"
    assert report["glm5-text-mtp3"]["speculator"] == "MultiModuleMTPSpeculator"
    assert report["glm5-mm-dflash2-prefix-cache"]["speculator"] == "DFlash2Speculator"
    assert report["qwen3next-dflash"]["speculator"] == "DFlashSpeculator"
    assert report["kimik3-text-dspark"]["speculator"] == "DSparkSpeculator"
    assert report["glm4-eagle3"]["speculator"] == "EagleSpeculator"


def test_every_scenario_builds_its_scheduler_and_kv_views(dry_run):
    _, report, _ = dry_run
    for scenario in gpu_scenarios.SCENARIOS:
        entry = report[scenario.name]
        assert entry["scheduler"]["free_blocks"] > 0, scenario.name
        assert entry["scheduler"]["block_size"] % entry["plan"]["groups"][0]["block_size"] == 0, scenario.name
        assert entry["kv_views"] and set(entry["kv_views"]) == set(entry["kv_views_packing_off"]), scenario.name


def test_packed_draft_blocks_are_real_in_the_kv_views(dry_run):
    """The draft layers' tensors hold twice the tokens per block with packing on, as the plan says; every other
    view that changes is a carved pool's (k blocks per shared block, the page unchanged)."""
    _, report, _ = dry_run
    for scenario in (s for s in gpu_scenarios.SCENARIOS if s.packed):
        on, off = report[scenario.name]["kv_views"], report[scenario.name]["kv_views_packing_off"]
        changed = {name for name in on if on[name] != off[name]}
        # [blocks, kv, tokens per block, head]: the token dim doubles
        packed = {n for n in changed if on[n][2] == 2 * off[n][2] and on[n][3] == off[n][3]}
        assert packed, scenario.name
        for name in changed - packed:
            assert on[name][0] % off[name][0] == 0 and on[name][1:] == off[name][1:], (scenario.name, name)


def test_constructed_scenarios_are_built_with_their_drafters_and_load_their_checkpoints(dry_run):
    """Model Runner V2's speculators (the GPU path), and every tensor of the constructed checkpoints through the
    built models' own load_weights: DFlash2's convolutions and candidate selector included."""
    _, report, _ = dry_run
    built = {name: report[name]["speculator"] for name in report if name.startswith("constructed-")}
    assert built == {"constructed-eagle3": "EagleSpeculator", "constructed-eagle3-prefix-cache": "EagleSpeculator",
                     "constructed-draft-model": "StandaloneARSpeculator", "constructed-mtp": "MTPSpeculator",
                     "constructed-dflash": "DFlashSpeculator", "constructed-dflash2": "DFlash2Speculator"}
    loaded = {name: report[name]["loaded"]["draft"] for name in built}
    assert loaded["constructed-dflash2"] > loaded["constructed-dflash"] > 0 and loaded["constructed-mtp"] > 0, loaded


def test_the_outcome_does_not_depend_on_the_scenarios_before(dry_run):
    """Each scenario builds its engine's own model-parallel groups: the expert-parallel group exactly for MoE
    targets, whatever ran before, and a scenario run again after another kind gives the same entry."""
    _, report, reruns = dry_run
    assert [(r["name"], r["after"]) for r in reruns] == [("constructed-draft-model", "blocker-indexer-head-32"),
                                                         ("glm5-text-mtp1", "constructed-draft-model")]
    assert report["blocker-indexer-head-32"]["reason"].startswith("Indexer.forward")  # GLM (MoE): built, then refused
    for rerun in reruns:
        first = {k: v for k, v in report[rerun["name"]].items() if k != "seconds"}
        assert {k: v for k, v in rerun["entry"].items() if k != "seconds"} == first, rerun["name"]
    groups = {name: entry["groups"] for name, entry in report.items() if "groups" in entry}
    assert {g["moe"] for g in groups.values()} == {True, False}
    assert all(g["expert_parallel"] == g["moe"] for g in groups.values()), groups


@pytest.mark.skipif(not pools_proven(), reason="the pools are not ported to this vLLM release: the test below")
def test_the_pools_scenario_carves_on_and_is_stock_with_the_off_switch(dry_run):
    """gpu-check's pools rules that need no GPU, on the Schedulers built for both arms (the dry run fails the
    scenario otherwise; here the numbers): carved draft, tail-ring and KDA groups, the same shared blocks, more
    capacity, a block pool of its own per carved group, and the same prefix hits for gpu-check's prompts."""
    _, report, _ = dry_run
    [name] = [s.name for s in gpu_scenarios.SCENARIOS if s.pools]
    on, off = report[name]["scheduler"], report[name]["scheduler_packing_off"]
    slots = {g["kind"] + ("/draft" if g["draft"] else ""): g["slots"] for g in on["kv_config"]["groups"]}
    assert on["kv_config"]["type"] == "PooledKVCacheConfig" and off["kv_config"]["type"] == "KVCacheConfig"
    assert slots["SlidingWindowSpec/draft"] > 1 and slots["CircularBufferSpec"] > 1, slots
    assert any(g["slots"] > 1 for g in on["kv_config"]["groups"] if g["kind"] == "MambaSpec"), slots
    assert all(g["slots"] == 1 for g in off["kv_config"]["groups"])
    assert on["kv_config"]["num_blocks"] == off["kv_config"]["num_blocks"] and on["free_blocks"] == off["free_blocks"]
    for key in ("kv_cache_max_concurrency", "kv_cache_size_tokens"):
        assert on["kv_config"][key] > off["kv_config"][key], key
    assert [p == "SlabBlockPool" for p in on["pools"]] == [g["slots"] > 1 for g in on["kv_config"]["groups"]]
    assert set(off["pools"]) == {"BlockPool"}
    assert on["prefix_hits"] == off["prefix_hits"] and sum(on["prefix_hits"]) > 0
    # The views where the slots become real: a carved layer's tensor addresses k blocks per shared block.
    views_on, views_off = report[name]["kv_views"], report[name]["kv_views_packing_off"]
    ratios = {views_on[n][0] // views_off[n][0] for n in views_on if views_on[n] != views_off[n]}
    assert ratios == {k for k in slots.values() if k > 1}, (ratios, slots)


@pytest.mark.skipif(pools_proven(), reason="the pools are proven on this vLLM release: the test above carves them")
def test_where_the_pools_are_not_ported_opting_in_plans_exactly_as_the_off_switch(dry_run):
    """On a vLLM release the pools were not measured on, the pools arm (VLLM_FORK_KV_POOLS=on) builds the Scheduler
    the off switch builds: the same plain KV config and block pools, the same capacity and prefix hits."""
    _, report, _ = dry_run
    [name] = [s.name for s in gpu_scenarios.SCENARIOS if s.pools]
    on, off = report[name]["scheduler"], report[name]["scheduler_packing_off"]
    assert on["kv_config"]["type"] == off["kv_config"]["type"] == "KVCacheConfig"
    assert all(g["slots"] == 1 for g in on["kv_config"]["groups"] + off["kv_config"]["groups"])
    for key in ("num_blocks", "kv_cache_max_concurrency", "kv_cache_size_tokens"):
        assert on["kv_config"][key] == off["kv_config"][key], key
    assert set(on["pools"]) == set(off["pools"]) == {"BlockPool"} and on["free_blocks"] == off["free_blocks"]
    assert on["prefix_hits"] == off["prefix_hits"] and sum(on["prefix_hits"]) > 0
    assert report[name]["kv_views"] == report[name]["kv_views_packing_off"]
