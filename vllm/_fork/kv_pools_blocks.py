"""KV pools per page size, scheduler side: a carved KV group takes slots from its own block pool, whose slots
live in blocks the shared pool lends it on demand and takes back when it runs short.

Slot `j` of lent shared block `b` is block id `b * k + j` of the carved pool; the group's per-layer views
(kv_pools_plan.py) put it at byte `b * stride + j * stride / k`, inside block `b`. A lent block belongs to one
carved pool until all its slots are free again, so no byte is ever owned twice. Admission stays vLLM's own
comparison: a carved group's demand is converted into the shared blocks it may take (an upper bound), and the
shared pool's free count includes the lent blocks whose slots are all free.

Slots are picked so that lent blocks fill up and cached slots survive as long as the shared pool has room:
free uncached slots of lent blocks in use (fullest first), then lent blocks without cached slots, then new blocks
from the shared pool, then cached slots (evicted), and only then blocks reclaimed from other carved pools.
"""

from __future__ import annotations

import logging
from typing import Any

from vllm.utils.math_utils import cdiv
from vllm.v1.core.block_pool import BlockPool
from vllm.v1.core.kv_cache_utils import KVCacheBlock

logger = logging.getLogger(__name__)


def slot_block_id(lent: int, slot: int, per_block: int) -> int:
    """The carved pool's block id of slot `slot` of lent shared block `lent` (what the group's views address)."""
    return lent * per_block + slot


class SharedBlockPool(BlockPool):
    """The shared pool: blocks lent to carved pools whose slots are all free count as free, and come back."""

    carved: list[SlabBlockPool]

    def own_free(self) -> int:
        return BlockPool.get_num_free_blocks(self)

    def get_num_free_blocks(self) -> int:
        return self.own_free() + sum(len(pool.idle) for pool in self.carved)

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        short = num_blocks - self.own_free()
        for clean_only in (True, False):  # lent blocks holding no cached slot first
            for pool in self.carved:
                if short > 0:
                    short -= pool.give_back(short, clean_only)
        return super().get_new_blocks(num_blocks)


class SlabBlockPool(BlockPool):
    """A carved group's pool: `per_block` slots in each shared block it borrows."""

    def __init__(self, shared: SharedBlockPool, per_block: int, zero_into: Any = None) -> None:
        self.shared = shared  # before BlockPool.__init__, which seeds the (shared) event queue
        kwargs = {"num_gpu_blocks": 1, "enable_caching": shared.enable_caching,
                  "hash_block_size": shared.hash_block_size, "enable_kv_cache_events": shared.enable_kv_cache_events}
        if getattr(shared, "num_hash_lookahead_tokens", 0):
            kwargs["num_hash_lookahead_tokens"] = shared.num_hash_lookahead_tokens
        super().__init__(**kwargs)  # only the null block: slot 0, inside the shared null block
        self.per_block = per_block
        self.num_gpu_blocks = shared.num_gpu_blocks * per_block  # the ids the group's views address
        # Indexable by slot id, in place: 0.34.0's prefix-cache map holds ids and looks blocks up in this very list.
        self.blocks.extend([None] * (self.num_gpu_blocks - len(self.blocks)))  # type: ignore[list-item]
        # The manager whose zeroing list gets each newly lent block (attention groups, when vLLM zeroes blocks).
        self.zero_into = zero_into
        self.lent: dict[int, KVCacheBlock] = {}
        self.slots: dict[int, list[KVCacheBlock]] = {}
        self.live: dict[int, int] = {}  # slots with ref_cnt > 0, per lent block
        self.clean: dict[int, int] = {}  # free slots without a hash, per lent block
        self.idle: set[int] = set()  # lent blocks without a live slot
        self.clean_in_use = 0  # free uncached slots of lent blocks that have a live slot

    @property
    def handle(self) -> Any:
        """What a slot's `pool` holds: a weak reference to this pool from vLLM 0.34.0 on, the pool itself before."""
        return getattr(self, "_weak_self", self)

    @property
    def kv_event_queue(self) -> list:
        return self.shared.kv_event_queue

    @kv_event_queue.setter
    def kv_event_queue(self, events: list) -> None:
        assert not events  # BlockPool seeds an empty queue; the shared pool's owner drains it

    def _lent_block(self, slot: KVCacheBlock) -> int:
        return slot.block_id // self.per_block

    def _change(self, block: int, live: int, clean: int) -> None:
        if self.live[block] > 0:
            self.clean_in_use -= self.clean[block]
        self.live[block] += live
        self.clean[block] += clean
        if self.live[block] > 0:
            self.clean_in_use += self.clean[block]
            self.idle.discard(block)
        else:
            self.idle.add(block)

    def shared_blocks_for(self, num_slots: int, hits: Any) -> int:
        """At most this many shared blocks serve `num_slots` slots (prefix hits `hits` among them)."""
        if num_slots >= self.num_gpu_blocks:  # a manager's "not now" sentinel, or more than the pool holds
            return self.shared.num_gpu_blocks + 1
        # A hit on a free slot of an idle lent block takes that whole block out of the shared free count.
        opened = {self._lent_block(b) for b in hits if b.pool is self.handle and b.ref_cnt == 0 and not b.is_null}
        return len(opened & self.idle) + cdiv(max(0, num_slots - self.clean_in_use), self.per_block)

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        picked: list[KVCacheBlock] = []

        def fill(block: int, clean_only: bool) -> None:
            for slot in self.slots[block]:
                if len(picked) == num_blocks:
                    return
                if slot.ref_cnt == 0 and (slot.block_hash is None or not clean_only):
                    self._take(slot)
                    picked.append(slot)

        in_use = sorted((b for b, n in self.live.items() if n and self.clean[b]), key=lambda b: -self.live[b])
        for block in in_use:
            fill(block, clean_only=True)
        for block in [b for b in self.idle if self.clean[b] == self.per_block]:
            fill(block, clean_only=False)
        while len(picked) < num_blocks and self.shared.own_free():
            wanted = min(cdiv(num_blocks - len(picked), self.per_block), self.shared.own_free())
            for block in self._borrow(BlockPool.get_new_blocks(self.shared, wanted)):
                fill(block, clean_only=False)
        for block in [b for b, n in self.live.items() if n] + list(self.idle):  # cached slots last
            fill(block, clean_only=False)
        if len(picked) < num_blocks:  # reclaims idle blocks of other carved pools; raises if none is left
            for block in self._borrow(self.shared.get_new_blocks(cdiv(num_blocks - len(picked), self.per_block))):
                fill(block, clean_only=False)
        return picked

    def _take(self, slot: KVCacheBlock) -> None:
        self.free_block_queue.remove(slot)
        clean = slot.block_hash is None
        if not clean:
            self._maybe_evict_cached_block(slot)
        assert slot.ref_cnt == 0
        slot.ref_cnt = 1
        self._change(self._lent_block(slot), 1, -1 if clean else 0)

    def _borrow(self, blocks: list[KVCacheBlock]) -> list[int]:
        ids = []
        for block in blocks:
            lent = block.block_id
            slots = [KVCacheBlock(slot_block_id(lent, j, self.per_block), pool=self.handle)
                     for j in range(self.per_block)]
            self.lent[lent], self.slots[lent] = block, slots
            for slot in slots:
                self.blocks[slot.block_id] = slot
            self.live[lent], self.clean[lent] = 0, self.per_block
            self.idle.add(lent)
            self.free_block_queue.append_n(slots)
            if self.zero_into is not None:  # the bytes may hold another group's data: zero the whole block
                self.zero_into.new_block_ids.append(lent)
            ids.append(lent)
        return ids

    def give_back(self, count: int, clean_only: bool) -> int:
        """Return up to `count` idle lent blocks (dropping their cached slots unless clean_only); how many."""
        given = [b for b in self.idle if not clean_only or self.clean[b] == self.per_block][:max(count, 0)]
        for block in given:
            for slot in self.slots.pop(block):
                self.free_block_queue.remove(slot)
                self._maybe_evict_cached_block(slot)
            del self.live[block], self.clean[block]
            self.idle.discard(block)
            self.shared.free_blocks([self.lent.pop(block)])
        return len(given)

    def touch(self, blocks) -> None:
        opening = [b for b in blocks if b.pool is self.handle and b.ref_cnt == 0 and not b.is_null]
        super().touch(blocks)
        for slot in opening:
            self._change(self._lent_block(slot), 1, -1 if slot.block_hash is None else 0)

    def free_blocks(self, ordered_blocks, **options: Any) -> None:
        # `options`: what this release's BlockPool.free_blocks takes besides the blocks (0.34.0: evict_first, with
        # which it hands another pool's blocks over to that pool).
        ordered = list(ordered_blocks)
        mine = {id(b): b for b in ordered if b.pool is self.handle and not b.is_null and b.ref_cnt > 0}
        super().free_blocks(ordered, **options)
        for slot in mine.values():
            if slot.ref_cnt == 0:
                self._change(self._lent_block(slot), -1, 1 if slot.block_hash is None else 0)

    def evict_blocks(self, block_ids) -> None:
        for block_id in block_ids:
            slots = self.slots.get(block_id // self.per_block)
            slot = slots[block_id % self.per_block] if slots else None
            if slot is not None and self._maybe_evict_cached_block(slot) and slot.ref_cnt == 0:
                self._change(self._lent_block(slot), 0, 1)

    def unpin_blocks(self, blocks, on_reuse) -> None:
        raise NotImplementedError("carved KV pools do not hold pinned HiSparse blocks")

    def reset_prefix_cache(self) -> bool:
        if any(self.live.values()):
            logger.warning("Failed to reset prefix cache: a carved KV pool still holds live slots")
            return False
        self.give_back(len(self.idle), clean_only=False)  # every cached slot is dropped with its block
        return True


def _in_shared_blocks(count_slots, pool: SlabBlockPool):
    """A carved manager's get_num_blocks_to_allocate, answered in shared blocks."""

    def count(request_id, num_tokens, new_computed_blocks, *args, **kwargs):
        slots = count_slots(request_id, num_tokens, new_computed_blocks, *args, **kwargs)
        return pool.shared_blocks_for(slots, new_computed_blocks)

    return count


def install_block_pools(coordinator: Any, kv_cache_config: Any) -> None:
    """Give each carved KV group of the config its own pool over the coordinator's (then shared) pool."""
    from vllm.v1.core.kv_cache_utils import partial_hash_hits_enabled

    slots = getattr(kv_cache_config, "slots_per_block", ())
    if not any(k > 1 for k in slots):
        return
    old = coordinator.block_pool
    if old.enable_caching and partial_hash_hits_enabled(kv_cache_config.kv_cache_groups, old.hash_block_size):
        raise ValueError("Carved KV pools cannot serve prefix hits inside a block (their copy-on-write copies "
                         "address one pool); unset prefix_match_unit or set VLLM_FORK_DISABLE_KV_PACKING=1")
    kwargs = {"num_gpu_blocks": old.num_gpu_blocks, "enable_caching": old.enable_caching,
              "hash_block_size": old.hash_block_size, "enable_kv_cache_events": old.enable_kv_cache_events,
              "metrics_collector": old.metrics_collector}
    if getattr(old, "num_hash_lookahead_tokens", 0):
        kwargs["num_hash_lookahead_tokens"] = old.num_hash_lookahead_tokens
    shared = SharedBlockPool(**kwargs)
    shared.carved = []
    coordinator.block_pool = shared
    for group_id, manager in enumerate(coordinator.single_type_managers):
        pool: BlockPool = shared
        if kv_cache_config.group_slots(group_id) > 1:
            zeroes = getattr(manager, "_record_new_block_ids", False)
            pool = SlabBlockPool(shared, kv_cache_config.group_slots(group_id), manager if zeroes else None)
            shared.carved.append(pool)
            # Slots are zeroed with their whole lent block; a slot only ever held this group's own pages.
            manager._record_new_block_ids = False
            manager.get_num_blocks_to_allocate = _in_shared_blocks(manager.get_num_blocks_to_allocate, pool)
        manager.block_pool = pool
        manager._null_block = pool.null_block
    logger.info("KV pools per page size: KV groups %s carve %s slots from each shared block",
                [i for i, k in enumerate(slots) if k > 1], [k for k in slots if k > 1])
