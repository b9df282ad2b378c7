"""Faults planted into the KV pools' real code, to watch the checks that guard against them fail.

Each plant is a context manager that replaces one function of the fork's code (the carver's output, the block pool's
slot ids, the pooled config's view size) and puts it back on exit. Used by kv_pools_kernel_check.py (the kernel
comparison) and run_llm.py (a CPU engine run serving through the faulty plan).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from vllm._fork import kv_pools_blocks, kv_pools_kernels, kv_pools_plan
from vllm._fork.kv_pools_config import PooledKVCacheConfig
from vllm.v1.kv_cache_interface import KVCacheConfig


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def _carved_tensors_changed(change: Callable[[Any], Any]):
    """The carver's output with `change` applied to every tensor it restrided (block stride below stock's)."""
    carve = kv_pools_plan.carve_kv_cache_config

    def planted(config, layout):
        carved = carve(config, layout)
        stock = {tuple(t.layers): t.block_stride for t in config.kv_cache_tensors}
        tensors = [change(t) if t.block_stride < stock[tuple(t.layers)] else t for t in carved.kv_cache_tensors]
        return carved if tensors == carved.kv_cache_tensors else replace(carved, kv_cache_tensors=tensors)

    return _patched(kv_pools_plan, "carve_kv_cache_config", planted)


def _one_request_from_block_zero(query: Any, block: int) -> dict:
    return _ONE_REQUEST(query, 0)


_ONE_REQUEST = kv_pools_kernels._one_request
PLANTS: dict[str, Callable[[], Any]] = {
    # The carved views one slot further into each block than the design puts them.
    "slot-offset": lambda: _carved_tensors_changed(lambda t: replace(t, offset=t.offset + t.block_stride)),
    # The carved views at half their block stride: each slot's page overlaps the next slot's.
    "overlapping-pages": lambda: _carved_tensors_changed(lambda t: replace(t, block_stride=t.block_stride // 2)),
    # The block pool numbering slots from the lent block before the one it lent.
    "block-base": lambda: _patched(kv_pools_blocks, "slot_block_id",
                                   lambda lent, slot, per_block: (lent - 1) * per_block + slot),
    # Reads of the block before the one asked for (block 0 of the self-test's few: sentinels on both sides), so the
    # stock and carved reads agree with each other and only the reference attention can tell.
    "read-elsewhere": lambda: _patched(kv_pools_kernels, "_one_request", _one_request_from_block_zero),
    # Views sized for the shared blocks only, not for k slots in each.
    "num-blocks": lambda: _patched(PooledKVCacheConfig, "num_blocks_of", KVCacheConfig.num_blocks_of),
}
