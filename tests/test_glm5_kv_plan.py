"""GLM-5.3-Flash + DFlash2 KV planning, TP8 H100 bf16, with vLLM's own planner on a stand-in SM90 platform.

Documents what 0.33.0 does (the fork has no KV-planning change yet): planning succeeds, the drafter's
sliding-window layers get a seventh group in the same block pool, and per-request capacity drops. The
scenario runner and its stubs are the benchmark's (benchmarks/glm5_kv/); this pins the behaviour so a
KV change in the fork shows up here as a deliberate update of these numbers.
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
    return {draft: kv_capacity.run_scenario(work, "H100", "auto", draft) for draft in (False, True)}


def test_stock_planner_accepts_glm5_with_the_dflash2_drafter(plans):
    target, both = plans[False], plans[True]
    assert target["ok"] and both["ok"], (target.get("error"), both.get("error"))
    # The kpool tail backend forces the block-outermost layout: one pool, no page-size unification error.
    assert target["layout"] == both["layout"] == "BLHNC"
    assert (target["n_groups"], both["n_groups"]) == (6, 7)  # + the drafter's sliding-window group
    assert target["block_size"] == both["block_size"] == 640
    # Unpadded per-token bytes per rank: MLA + indexer for the target, 5 SWA layers x 1 KV head for the draft.
    assert (both["spec_bytes"]["target_per_token"], both["spec_bytes"]["draft_per_token"]) == (11627.0, 2560.0)


def test_what_the_drafter_costs_per_request(plans):
    target, both = plans[False]["concurrency"], plans[True]["concurrency"]
    # 8k requests: 186.6 -> 72.6 (bound/planned 24.8%); 128k: 22.26 -> 18.37. See benchmarks/glm5_kv/README.md.
    assert round(target["8192"], 1) == 186.6 and round(both["8192"], 1) == 72.6
    assert round(target["131072"], 2) == 22.26 and round(both["131072"], 2) == 18.37


def test_where_an_8k_request_blocks_go(plans):
    """Per group: KDA state blocks grow from 3 to 10 with 7 speculative tokens, the draft's window takes 11
    blocks, and every block costs the pool's whole stride whatever the group's page (padding)."""
    target, both = plans[False]["groups_8k"], plans[True]["groups_8k"]
    blocks = lambda groups: [(g["kind"], g["blocks"]) for g in groups]  # noqa: E731
    kda, mla, tail, draft = ("MambaSpec", "MLAAttentionSpec", "CircularBufferSpec", "SlidingWindowSpec (draft)")
    assert blocks(target) == [(kda, 3)] * 4 + [(mla, 13), (tail, 1)]
    assert blocks(both) == [(kda, 10)] * 4 + [(mla, 13), (tail, 1), (draft, 11)]
    stride = plans[True]["block_stride"]
    taken = sum(g["blocks"] for g in both) * stride
    needed = sum(g["needed_bytes"] for g in both)
    assert round((taken - needed) / (1 << 20), 1) == 140.9  # MiB of one 8k request that is padding
