"""gpu-check's KV pools A/B (GLM + DFlash2, prefix caching on): its rules and orchestration on canned engine results.

The canned KV configs have the shape gpu_engine.kv_config reports and the numbers `make gpu-dry-run` plans for this
scenario's target (tests/test_gpu_dry_run.py checks those against the real Scheduler); the engines need a GPU.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gpu_scenarios  # noqa: E402
from gpu_verdicts import POOLS_LOG, pools_verdict  # noqa: E402

NAME = "glm5-text-dflash2-prefix-cache"
OFF_ENV = {"VLLM_FORK_DISABLE_KV_PACKING": "1"}
KINDS = ["MambaSpec"] * 4 + ["MLAAttentionSpec", "CircularBufferSpec", "SlidingWindowSpec"]
SLOTS = [1, 1, 1, 2, 1, 82, 2]


def _kv(slots, pooled: bool, tokens: int, concurrency: float, blocks: int = 6200) -> dict:
    groups = [{"kind": kind, "layers": 2, "draft": kind == "SlidingWindowSpec", "block_size": 16 if kind ==
               "CircularBufferSpec" else 640, "window": 512 if kind == "SlidingWindowSpec" else None, "slots": k}
              for kind, k in zip(KINDS, slots)]
    return {"type": "PooledKVCacheConfig" if pooled else "KVCacheConfig", "num_blocks": blocks, "groups": groups,
            "kv_cache_size_tokens": tokens, "kv_cache_max_concurrency": concurrency}


def _arm(pools: bool) -> dict:
    """One engine's answer as gpu_engine.run gives it, for the pools arm or the off-switch arm."""
    kv = _kv(SLOTS, True, 2220049, 67.75) if pools else _kv([1] * 7, False, 1991780, 60.78)
    log = "Using FLASHINFER_MLA_SPARSE_SM90 attention backend\n"
    log += f"{POOLS_LOG} [3, 5, 6] carve [2, 82, 2] slots from each shared block\n" if pools else ""
    return {"ok": True, "kv_config": kv, "kv_groups": kv["groups"], "log_text": log, "prefix_cache_hits": 17920,
            "prefix_cache_queries": 28960, "speculator": "DFlash2Speculator", "drafts": 40, "draft_tokens": 280,
            "accepted": 30, "tokens": [[7, 8]] * 8, "sharpened": {"checksum": 1.0}}


def test_the_pools_ab_passes_when_pools_carve_and_the_switch_restores_stock():
    assert pools_verdict(_arm(True), _arm(False)) == []


def test_an_ignored_off_switch_fails():
    problems = pools_verdict(_arm(True), _arm(True))
    assert problems[0] == ("VLLM_FORK_DISABLE_KV_PACKING=1 ignored: a PooledKVCacheConfig with slots "
                           "[1, 1, 1, 2, 1, 82, 2]")
    assert "kv_cache_max_concurrency 67.75 with pools, not above 67.75 without" in problems
    assert f"VLLM_FORK_DISABLE_KV_PACKING=1 ignored: the log says '{POOLS_LOG} ...'" in problems


def test_pools_that_hold_no_more_tokens_fail():
    on = _arm(True)
    on["kv_config"]["kv_cache_size_tokens"] = 1991780
    assert pools_verdict(on, _arm(False)) == ["kv_cache_size_tokens 1991780 with pools, not above 1991780 without"]


def test_a_different_prefix_cache_hit_rate_fails():
    on = dict(_arm(True), prefix_cache_hits=15360)
    assert pools_verdict(on, _arm(False)) == ["prefix-cache hit rate 0.5304 with pools (15360 of 28960 tokens), "
                                              "0.6188 without (17920 of 28960)"]
    unused = {"prefix_cache_hits": 0, "prefix_cache_queries": 28960}
    assert "no prefix-cache hit" in pools_verdict(_arm(True) | unused, _arm(False) | unused)[0]


@pytest.mark.parametrize("group, says", [(3, "a KDA group is not carved"), (5, "the tail ring is not carved"),
                                         (6, "the draft group is not carved")])
def test_each_narrow_group_must_be_carved(group, says):
    on = _arm(True)
    on["kv_config"]["groups"][group]["slots"] = 1
    assert pools_verdict(on, _arm(False))[0].startswith(f"pools on: {says}")


def test_other_shared_blocks_or_a_missing_log_line_fail():
    on = _arm(True)
    on["kv_config"]["num_blocks"], on["log_text"] = 6100, ""
    assert pools_verdict(on, _arm(False)) == ["6100 shared blocks with pools, 6200 without (must be equal)",
                                              f"pools on: no log line '{POOLS_LOG} ...'"]


def _check(monkeypatch, tmp_path, off_result) -> tuple[int, list, dict]:
    """gpu_check.main on the pools scenario, every engine answered with canned results."""
    import gpu_check
    import gpu_pool

    started = []

    def fake_pool(jobs, parallel, cache, done, solo_first=False, deadline=None):
        for job in jobs:
            request = job.request
            started.append((job.name, request.get("env", {}), [len(p) for p in request["prompts"]],
                            [len(p) for p in request.get("then", [])]))
            speculative = request["engine"]["speculative_config"] is not None
            if not speculative:
                top = [[(7, -0.1), (9, -3.0)], [(8, -0.1), (9, -4.0)]]
                job.result = {"ok": True, "tokens": [[7, 8]] * 8, "topk": [top] * 8, "sharpened": {"checksum": 1.0}}
            else:
                job.result = copy.deepcopy(off_result if request.get("env") == OFF_ENV else _arm(True))
            done(job)

    monkeypatch.setattr(gpu_pool, "run", fake_pool)
    monkeypatch.setattr(gpu_scenarios, "write", lambda root: root)
    code = gpu_check.main(["--only", NAME, "--out", str(tmp_path)])
    return code, started, json.loads((tmp_path / "report.json").read_text())["scenarios"][NAME]


def test_gpu_check_runs_the_pools_ab_on_shared_prefix_prompts(monkeypatch, tmp_path):
    import gpu_check

    assert gpu_scenarios.BY_NAME[NAME].pools and gpu_scenarios.BY_NAME[NAME].engine["enable_prefix_caching"]
    code, started, row = _check(monkeypatch, tmp_path, _arm(False))
    assert code == 0, row["problems"]
    prompts = ([gpu_check.POOLS_PREFIX], [gpu_check.POOLS_PREFIX + n for n in gpu_check.POOLS_SUFFIXES])
    assert started == [("base-glm5_text_pools-auto-prefix", {}, *prompts), (f"{NAME}-spec", {}, *prompts),
                       (f"{NAME}-packing-off", OFF_ENV, *prompts)]
    first, *rest = gpu_check.request_prompts("prefix").values()
    assert all(p[:gpu_check.POOLS_PREFIX] == first[0] for p in rest[0])  # every prompt extends the prefix


def test_gpu_check_fails_the_pools_scenario_when_the_switch_is_ignored(monkeypatch, tmp_path):
    code, _, row = _check(monkeypatch, tmp_path, _arm(True))
    assert code == 1
    assert row["problems"][0].startswith("VLLM_FORK_DISABLE_KV_PACKING=1 ignored")


def test_the_table_shows_both_arms_kv_capacity(monkeypatch, tmp_path):
    _check(monkeypatch, tmp_path, _arm(False))
    assert "2,220,049 (1,991,780)" in (tmp_path / "table.txt").read_text()


def _built(pools: bool, hits=(0, 1920, 2560)) -> dict:
    """A dry-run Scheduler entry (gpu_dry_checks.scheduler plus the prefix hits) for one arm."""
    kv = _arm(pools)["kv_config"]
    carved = ["SlabBlockPool" if g["slots"] > 1 else "SharedBlockPool" for g in kv["groups"]]
    return {"kv_config": kv, "pools": carved if pools else ["BlockPool"] * len(kv["groups"]), "prefix_hits": list(hits)}


def test_the_dry_run_applies_the_gpu_free_rules_to_both_schedulers():
    import gpu_dry_run  # installs no stand-in platform at import (its main() does)

    scenario = gpu_scenarios.BY_NAME[NAME]
    gpu_dry_run.check_pools(scenario, _built(True), _built(False))
    gpu_dry_run.check_pools(gpu_scenarios.BY_NAME["glm5-text-mtp1"], _built(False), _built(False))  # not an A/B
    shared_only = dict(_built(True), pools=["SharedBlockPool"] * 7)
    with pytest.raises(gpu_dry_run.Finding, match=r"pools on: the scheduler's block pools \['SharedBlockPool'"):
        gpu_dry_run.check_pools(scenario, shared_only, _built(False))
    with pytest.raises(gpu_dry_run.Finding, match="VLLM_FORK_DISABLE_KV_PACKING=1 ignored"):
        gpu_dry_run.check_pools(scenario, _built(True), _built(True))
    with pytest.raises(gpu_dry_run.Finding, match=r"prefix hits per prompt \[0, 1920, 2560\] with pools, \[0, 640"):
        gpu_dry_run.check_pools(scenario, _built(True), _built(False, hits=(0, 640, 2560)))
