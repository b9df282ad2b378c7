"""VLLM_FORK_KV_POOLS=auto: the KV pools' start-up self-test on every worker, before any KV cache is allocated.

The engine core has planned and carved; each worker then runs its own attention groups' kernels (the layers the
model runner built, on the worker's device) on a carved slot and on the stock block (kv_pools_selftest.py). Only
groups that pass on every worker are carved. Any mismatch or error, on any worker, keeps the stock plan for the whole
engine with one warning line naming the group, the kernel and the bytes; the self-test itself never stops the engine.
With VLLM_FORK_KV_POOLS=on no kernel runs, but the workers still name their attention layers' backends, so that a
backend vLLM fell back to by itself (FLEX_ATTENTION) is never carved.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from vllm._fork.kv_pools_kernels import AttentionKernels, NotCovered
from vllm._fork.kv_pools_selftest import GroupResult, attention_spec, check_plan, error_line, spec_of
from vllm._fork.vocabulary import SelfTestStatus

logger = logging.getLogger(__name__)


def _backend(layer: Any) -> Any:
    return layer.get_attn_backend() if hasattr(layer, "get_attn_backend") else layer.attn_backend


def _kernels_for(worker: Any, carved: Any, device: Any):
    """A group's kernels from the worker's own first layer of it: its backend, its impl, and (CPU_ATTN) the
    instruction set that backend's metadata builder picks for it."""
    layers = worker.vllm_config.compilation_config.static_forward_context

    def kernels_for(group_id: int, spec: Any) -> AttentionKernels:
        name = carved.kv_cache_groups[group_id].layer_names[0]
        layer = layers.get(name)
        if layer is None or not hasattr(layer, "impl"):
            raise NotCovered(f"{name}: not an attention layer this worker built")
        backend = _backend(layer)
        kernels = AttentionKernels(backend.get_name(), spec, layer)
        if kernels.backend == "CPU_ATTN":
            kernels.isa = backend.get_builder_cls()(spec, [name], worker.vllm_config, device).isa
        return kernels

    return kernels_for


def self_test_on_worker(worker: Any, stock: Any, carved: Any, layout: Any) -> list[GroupResult]:
    """Run on each worker by collective_rpc: every carved group of `carved` against `stock` on this worker's device."""
    import torch

    device = getattr(worker, "device", None) or torch.device("cpu")
    with torch.inference_mode():
        return check_plan(stock, carved, layout, device, _kernels_for(worker, carved, device))


def _run_everywhere(executor: Any, stock: Any, carved: Any, layout: Any) -> list[list[GroupResult]] | str:
    """Each worker's results, or why the self-test could not run (its error, in one line)."""
    if executor is None:
        return "no workers to run it on"
    try:
        ranks = executor.collective_rpc(self_test_on_worker, args=(stock, carved, layout))
    except Exception as error:  # noqa: BLE001  a self-test that cannot run keeps the stock plan, never the engine down
        return error_line(error)
    if not all(isinstance(found, list) for found in ranks):
        return f"a worker answered {ranks!r} instead of its results"
    return ranks


def zeroes_new_blocks(config: Any) -> bool:
    """Whether the workers zero new blocks by id (vLLM 0.34.0's KVBlockZeroer: Mamba layers or mixed KV precision),
    which no self-test covers on carved slots."""
    return bool(getattr(config, "needs_kv_cache_zeroing", False))


def self_tested_groups(executor: Any, stock: Any, carved: Any, layout: Any) -> set[int]:
    """The carved groups whose kernels passed on every worker; empty when the engine keeps the stock plan."""
    if zeroes_new_blocks(stock):
        logger.info("KV pools not carved: this plan zeroes new blocks (KVBlockZeroer), and no self-test covers the "
                    "zeroer on carved slots; stock KV plan (VLLM_FORK_KV_POOLS=on carves without the self-test)")
        return set()
    started = time.perf_counter()
    ranks = _run_everywhere(executor, stock, carved, layout)
    seconds = time.perf_counter() - started
    if isinstance(ranks, str):
        logger.warning("KV pools not carved: their start-up self-test did not run (%s); stock KV plan", ranks)
        return set()
    results = [(rank, result) for rank, found in enumerate(ranks) for result in found]
    failed = [(rank, result) for rank, result in results if result.status is SelfTestStatus.FAILED]
    if failed:
        rank, result = failed[0]
        logger.warning("KV pools not carved: their start-up self-test failed on rank %d: %s; stock KV plan for the "
                       "whole engine (docs/kv-pools.md)", rank, result.line())
        return set()
    uncovered = {result.group: result for _, result in results if result.status is SelfTestStatus.NOT_COVERED}
    for result in uncovered.values():
        logger.info("KV pools: KV group %d stays stock (%s)", result.group, result.detail)
    passed = {result.group for _, result in results if result.status is SelfTestStatus.PASSED} - set(uncovered)
    if passed:
        logger.info("KV pools' start-up self-test passed on %d worker(s) for KV groups %s (%s) in %.2f s", len(ranks),
                    sorted(passed), ", ".join(sorted({r.kernel for _, r in results if r.group in passed})), seconds)
    return passed


def attention_backends_on_worker(worker: Any, carved: Any) -> dict[int, str]:
    """Run on each worker by collective_rpc (VLLM_FORK_KV_POOLS=on): the attention backend of each carved plain
    attention group, from the group's first layer as this worker built it."""
    layers = worker.vllm_config.compilation_config.static_forward_context
    found = {}
    for group_id, group in enumerate(carved.kv_cache_groups):
        if carved.group_slots(group_id) == 1:
            continue
        name = group.layer_names[0]
        if attention_spec(spec_of(carved, group_id, name)) and name in layers:
            found[group_id] = _backend(layers[name]).get_name()
    return found


def groups_on_other_backends(executor: Any, carved: Any, backends: frozenset) -> set[int] | None:
    """The carved attention groups some worker runs on a backend outside `backends` (a fallback vLLM picked by
    itself); None, with a warning, when the workers cannot be asked."""
    try:
        ranks = executor.collective_rpc(attention_backends_on_worker, args=(carved,))
        other = {group: name for rank in ranks for group, name in dict(rank).items() if name not in backends}
    except Exception as error:  # noqa: BLE001  a question that cannot be asked keeps the stock plan
        logger.warning("KV pools not carved: the workers could not say their attention backends (%s); stock KV plan",
                       error_line(error))
        return None
    for group, name in sorted(other.items()):
        logger.info("KV pools: KV group %d stays stock: its layers run on %s, not one of %s", group, name,
                    ", ".join(sorted(backends)))
    return set(other)


def answer_without_device(method: Any, worker: Any, args: tuple) -> Any:
    """A planning stand-in's answer (spec-check, the dry run) for one worker: the backend question from its meta-built
    layers, as a worker would answer it; no self-test result (the kernels need the device)."""
    return method(worker, *args) if method is attention_backends_on_worker else []
