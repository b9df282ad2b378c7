"""VLLM_FORK_KV_POOLS=auto (vllm/_fork/kv_pools_auto.py): what the engine carves from its workers' self-test results.

The workers here answer with results, not kernels: the kernels themselves are compared in test_kv_pools_selftest.py
(Triton, under the interpreter) and on the CPU engine's real workers in test_cpu_e2e.py (CPU_ATTN, with planted
faults). These tests hold the decision: carve only what passed everywhere, keep the stock plan on any failure, and
never let the self-test itself stop the engine.
"""

from __future__ import annotations

import logging
import types

import pytest
import torch
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor

from vllm._fork import kv_pools_auto, kv_pools_plan
from vllm._fork.kv_pages import POOLS_ENV
from vllm._fork.kv_pools_selftest import GroupResult
from vllm._fork.vocabulary import SelfTestStatus

BLOCKS = 16
PASSED, FAILED, NOT_COVERED = SelfTestStatus.PASSED, SelfTestStatus.FAILED, SelfTestStatus.NOT_COVERED


def _spec(heads: int, **extra) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=16, num_kv_heads=heads, head_size=64, dtype=torch.float32, **extra)


def _plan() -> KVCacheConfig:
    """Two narrow groups (2 and 1 KV heads) padded to a wide one's page (4 heads), each layer in its own region."""
    page = _spec(4).page_size_bytes
    specs = {"narrow": _spec(2, page_size_padded=page), "narrower": _spec(1, page_size_padded=page), "wide": _spec(4)}
    tensors = [KVCacheTensor(size=BLOCKS * page, layers=[name], layer_stride=BLOCKS * page, block_stride=page)
               for name in specs]
    groups = [KVCacheGroupSpec([name], spec) for name, spec in specs.items()]
    return KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=tensors, kv_cache_groups=groups)


class Workers:
    """An executor whose workers answer the self-test with given results (or an error)."""

    def __init__(self, *ranks, error: Exception | None = None):
        self.ranks, self.error, self.asked = list(ranks), error, []

    def collective_rpc(self, method, args=()):
        self.asked.append(method)
        if self.error is not None:
            raise self.error
        return self.ranks


def _engine_config():
    from vllm.v1.kv_cache_layout import KVCacheLayout

    cache = types.SimpleNamespace(get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBHNC)
    return types.SimpleNamespace(cache_config=cache)


@pytest.fixture
def auto(monkeypatch):
    """Default mode; every rule of pools_apply other than the mode answers "may carve" (test_kv_pages.py holds them)."""
    monkeypatch.delenv(POOLS_ENV, raising=False)
    monkeypatch.setattr(kv_pools_plan, "pools_apply", lambda *args: True)


def _carve(workers) -> tuple[KVCacheConfig, list]:
    stock = _plan()
    return stock, kv_pools_plan.carve_kv_cache_configs(_engine_config(), [stock], workers)


def test_groups_that_pass_on_every_rank_are_carved_and_the_others_stay_stock(auto):
    """Group 0 passes on both ranks; group 1 is not covered on rank 1: only group 0 gets slots."""
    workers = Workers([GroupResult(0, PASSED, "CPU_ATTN"), GroupResult(1, PASSED, "CPU_ATTN")],
                      [GroupResult(0, PASSED, "CPU_ATTN"), GroupResult(1, NOT_COVERED, "", "CUSTOM: no comparison")])
    stock, (carved,) = _carve(workers)
    assert workers.asked == [kv_pools_auto.self_test_on_worker]
    assert carved.slots_per_block == (2, 1, 1)
    assert [t.block_stride for t in carved.kv_cache_tensors] == [stock.kv_cache_tensors[0].block_stride // 2,
                                                                 *(t.block_stride for t in stock.kv_cache_tensors[1:])]


def test_a_failure_on_any_rank_keeps_the_stock_plan_with_one_warning_naming_it(auto, caplog):
    workers = Workers([GroupResult(0, PASSED, "FLASH_ATTN"), GroupResult(1, PASSED, "FLASH_ATTN")],
                      [GroupResult(0, PASSED, "FLASH_ATTN"),
                       GroupResult(1, FAILED, "FLASH_ATTN write", "64 bytes differ, the first at byte 3")])
    with caplog.at_level(logging.INFO, logger=kv_pools_auto.__name__):
        stock, (planned,) = _carve(workers)
    assert planned is stock
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [("KV pools not carved: their start-up self-test failed on rank 1: KV group 1: FLASH_ATTN "
                         "write: 64 bytes differ, the first at byte 3; stock KV plan for the whole engine "
                         "(docs/kv-pools.md)")]


def test_a_self_test_that_cannot_run_keeps_the_stock_plan_and_the_engine_up(auto, caplog):
    workers = Workers(error=RuntimeError("worker 3 died\nwith a long traceback"))
    with caplog.at_level(logging.WARNING, logger=kv_pools_auto.__name__):
        stock, (planned,) = _carve(workers)
    assert planned is stock
    assert [r.getMessage() for r in caplog.records] == [
        "KV pools not carved: their start-up self-test did not run (RuntimeError: worker 3 died); stock KV plan"]


def test_without_workers_to_ask_nothing_is_carved(auto):
    stock, (planned,) = _carve(None)
    assert planned is stock


def test_a_plan_that_zeroes_new_blocks_is_not_self_tested(auto):
    """0.34.0 zeroes new blocks (KVBlockZeroer) with Mamba layers or mixed KV precision; no comparison covers the
    zeroer on carved slots, so the workers are not even asked."""
    workers = Workers([GroupResult(0, PASSED, "FLASH_ATTN"), GroupResult(1, PASSED, "FLASH_ATTN")])
    stock = _plan()
    stock.needs_kv_cache_zeroing = True
    (planned,) = kv_pools_plan.carve_kv_cache_configs(_engine_config(), [stock], workers)
    assert planned is stock and workers.asked == []


def test_on_runs_no_self_test_but_keeps_a_group_on_another_backend_stock(auto, monkeypatch, caplog):
    """VLLM_FORK_KV_POOLS=on: the workers only name their attention layers' backends; a group on a backend vLLM fell
    back to by itself (FLEX_ATTENTION sizes its block map by the shared block count) stays stock, the other is
    carved, and one line says why."""
    monkeypatch.setenv(POOLS_ENV, "on")
    workers = Workers({0: "FLASH_ATTN", 1: "FLEX_ATTENTION"}, {0: "FLASH_ATTN", 1: "FLEX_ATTENTION"})
    with caplog.at_level(logging.INFO, logger=kv_pools_auto.__name__):
        _, (carved,) = _carve(workers)
    assert workers.asked == [kv_pools_auto.attention_backends_on_worker]
    assert carved.slots_per_block == (2, 1, 1)
    assert [r.getMessage() for r in caplog.records] == [
        ("KV pools: KV group 1 stays stock: its layers run on FLEX_ATTENTION, not one of CPU_ATTN, FLASH_ATTN, "
         "TRITON_ATTN")]


def test_on_carves_every_group_whose_layers_run_on_a_known_backend(auto, monkeypatch):
    monkeypatch.setenv(POOLS_ENV, "on")
    _, (carved,) = _carve(Workers({0: "CPU_ATTN", 1: "CPU_ATTN"}))
    assert carved.slots_per_block == (2, 4, 1)


def test_on_keeps_the_stock_plan_when_the_workers_cannot_be_asked(auto, monkeypatch):
    monkeypatch.setenv(POOLS_ENV, "on")
    stock, (planned,) = _carve(Workers(error=RuntimeError("a worker died")))
    assert planned is stock


@pytest.mark.parametrize("mode, zeroes, pending", [("auto", False, True), ("auto", True, False), ("on", False, False),
                                                   ("off", False, False)])
def test_spec_check_says_the_engine_may_carve_only_where_it_would_self_test(auto, monkeypatch, mode, zeroes,
                                                                              pending):
    """spec-check cannot run the self-test: it plans stock's and adds its line only where the engine would ask."""
    monkeypatch.setenv(POOLS_ENV, mode)
    stock = _plan()
    stock.needs_kv_cache_zeroing = zeroes
    assert kv_pools_plan.pools_pending(_engine_config(), stock) is pending
