"""Carved KV pools (vllm/_fork/kv_pools_blocks.py) against the installed vLLM's own BlockPool calls."""

from __future__ import annotations

from vllm._fork.kv_pools_blocks import SharedBlockPool, SlabBlockPool


def test_slots_freed_through_the_shared_pool_go_back_to_their_own_pool():
    """vLLM 0.34.0's BlockPool.free_blocks hands blocks of another pool to that pool's free_blocks, with its
    evict_first option (deferred frees may mix pools): a carved pool takes the call and counts its slots free."""
    shared = SharedBlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=16)
    shared.carved = []
    slab = SlabBlockPool(shared, 2)
    shared.carved.append(slab)
    free_before = shared.get_num_free_blocks()
    slots = slab.get_new_blocks(3)  # two shared blocks lent: 4 slots, 3 live
    assert shared.get_num_free_blocks() == free_before - 2
    shared.free_blocks(slots)
    assert all(slot.ref_cnt == 0 for slot in slots) and sum(slab.live.values()) == 0
    assert shared.get_num_free_blocks() == free_before  # both lent blocks idle again, counted free
