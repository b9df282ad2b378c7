"""GLM-5.3-Flash + DFlash2 KV planning, TP8 H100 bf16, with vLLM's own planner on a stand-in SM90 platform.

Documents what stock 0.33.0 does (planning succeeds, the drafter's sliding-window layers get a seventh
group in the same block pool, per-request capacity drops) and what the fork's draft group packing changes
(vllm/_fork/kv_pages.py): without prefix caching the draft group's blocks hold 4x the tokens in the same
stride; with it (vLLM's default) the plan is stock's. The scenario runner and its stubs are the benchmark's
(benchmarks/glm5_kv/); "stock" runs the installed fork with its packing hook taken out again, so both plans
come from the same planner code.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "glm5_kv"
sys.path.insert(0, str(BENCH))

import kv_capacity  # noqa: E402  (the benchmark's own scenario runner: one fresh interpreter per plan)
import model_configs  # noqa: E402
import sm90_stub  # noqa: E402  (only the stub builder runs in this process)


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("kvplan")
    model_configs.write(work / "models")
    sm90_stub.build_libcuda_stub(work)  # kv_capacity.run_scenario expects work/libcuda.so.1
    runs = {"target": (False, "fork"), "stock": (True, "stock"), "fork": (True, "fork"),
            "stock-nopc": (True, "stock", False), "fork-nopc": (True, "fork", False)}
    return kv_capacity.run_scenarios(work, "H100", "auto", runs)  # one interpreter for the five plans


def test_stock_planner_accepts_glm5_with_the_dflash2_drafter(plans):
    target, both = plans["target"], plans["stock"]
    assert target["ok"] and both["ok"], (target.get("error"), both.get("error"))
    # The kpool tail backend forces the block-outermost layout: one pool, no page-size unification error.
    assert target["layout"] == both["layout"] == "BLHNC"
    assert (target["n_groups"], both["n_groups"]) == (6, 7)  # + the drafter's sliding-window group
    assert target["block_size"] == both["block_size"] == 640
    # Unpadded per-token bytes per rank: MLA + indexer for the target, 5 SWA layers x 1 KV head for the draft.
    assert (both["spec_bytes"]["target_per_token"], both["spec_bytes"]["draft_per_token"]) == (11627.0, 2560.0)


def test_what_the_drafter_costs_per_request(plans):
    target, both = plans["target"]["concurrency"], plans["stock"]["concurrency"]
    # 8k requests: 186.6 -> 72.6 (bound/planned 24.8%); 128k: 22.26 -> 18.37. See benchmarks/glm5_kv/README.md.
    assert round(target["8192"], 1) == 186.6 and round(both["8192"], 1) == 72.6
    assert round(target["131072"], 2) == 22.26 and round(both["131072"], 2) == 18.37


def test_where_an_8k_request_blocks_go(plans):
    """Per group: KDA state blocks grow from 3 to 10 with 7 speculative tokens, the draft's window takes 11
    blocks, and every block costs the pool's whole stride whatever the group's page (padding)."""
    target, both = plans["target"]["groups_8k"], plans["stock"]["groups_8k"]
    blocks = lambda groups: [(g["kind"], g["blocks"]) for g in groups]  # noqa: E731
    kda, mla, tail, draft = ("MambaSpec", "MLAAttentionSpec", "CircularBufferSpec", "SlidingWindowSpec (draft)")
    assert blocks(target) == [(kda, 3)] * 4 + [(mla, 13), (tail, 1)]
    assert blocks(both) == [(kda, 10)] * 4 + [(mla, 13), (tail, 1), (draft, 11)]
    assert round(padding_mib(plans["stock"]), 1) == 140.9  # MiB of one 8k request that is padding


def padding_mib(plan: dict) -> float:
    taken = sum(g["blocks"] for g in plan["groups_8k"]) * plan["block_stride"]
    return (taken - sum(g["needed_bytes"] for g in plan["groups_8k"])) / (1 << 20)


def test_with_prefix_caching_the_fork_plans_as_stock(plans):
    # Packing would align cache hits to the draft's 2,560-token blocks instead of 640: not done by default.
    stock, fork = plans["stock"], plans["fork"]
    assert fork["ok"], fork.get("error")
    for key in ("layout", "n_groups", "block_size", "block_stride", "num_blocks", "concurrency", "groups_8k"):
        assert fork[key] == stock[key], key


def test_without_prefix_caching_the_fork_packs_the_draft_window_into_the_same_stride(plans):
    stock, fork = plans["stock-nopc"], plans["fork-nopc"]
    assert stock["ok"] and fork["ok"], (stock.get("error"), fork.get("error"))
    # Same pool geometry: layout, groups, target block size and block stride are untouched.
    for key in ("layout", "n_groups", "block_size", "block_stride"):
        assert fork[key] == stock[key], key
    draft = [g for g in fork["groups_8k"] if "(draft)" in g["kind"]]
    assert [(g["block_size"], g["blocks"]) for g in draft] == [(2560, 4)]  # 4 x 640 tokens per block, 11 -> 4
    assert [g for g in fork["groups_8k"] if "(draft)" not in g["kind"]] == \
        [g for g in stock["groups_8k"] if "(draft)" not in g["kind"]]
    # 8k requests: 82.8 -> 94.4 concurrent (+14 %). KDA states leave align mode: 8 blocks each, not 10.
    assert round(stock["concurrency"]["8192"], 1) == 82.8 and round(fork["concurrency"]["8192"], 1) == 94.4
    assert round(stock["concurrency"]["131072"], 2) == 18.96 and round(fork["concurrency"]["131072"], 2) == 19.51
    assert (round(padding_mib(stock), 1), round(padding_mib(fork), 1)) == (126.4, 68.8)  # MiB per 8k request
