"""A scheduler's use of vLLM's KVCacheManager, step by step on a real KV plan, and the carved pools' invariants.

`Engine` calls the manager as vllm/v1/core/sched/scheduler.py does: running requests first (decode with the
drafter's speculative tokens and lookahead, or the next prefill chunk, block-aligned for Mamba "align"), a failed
allocation preempts the newest running request, then waiting requests are admitted with their prefix hits.
Everything below the manager (coordinator, single-type managers, block pools, the fork's carved pools) is vLLM's
and the fork's own code; nothing is stubbed. `check` looks at the pools after every step.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_block_hash, get_group_id, get_request_block_hasher, init_none_hash
from vllm.v1.request import Request, RequestStatus

MANAGER_ARGS = ("max_model_len", "max_in_flight_tokens", "enable_caching", "use_eagle", "num_hash_lookahead_tokens",
                "num_prefill_lookahead", "scheduler_block_size", "hash_block_size")


class Engine:
    """The scheduler's side of the KV cache: requests, steps, preemption; hits and zeroing recorded."""

    def __init__(self, config, args: dict, num_blocks: int | None = None) -> None:
        init_none_hash(sha256)
        self.config = replace(config, num_blocks=num_blocks) if num_blocks else config
        self.manager = KVCacheManager(kv_cache_config=self.config, **{k: args[k] for k in MANAGER_ARGS})
        self.block = args["scheduler_block_size"]
        self.lookahead, self.spec = args["num_lookahead_tokens"], args["num_speculative_tokens"]
        self.hasher = get_request_block_hasher(args["hash_block_size"], sha256, args["num_hash_lookahead_tokens"])
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.hits: list[tuple[str, int]] = []  # (request, prefix-hit tokens) per admission
        self.preempted: set[str] = set()  # requests preempted at least once

    def add(self, request_id: str, prompt: list[int], chunk_blocks: int = 2) -> None:
        request = Request(request_id, prompt, SamplingParams(max_tokens=1 << 20), None, block_hasher=self.hasher)
        request.chunk_tokens = chunk_blocks * self.block  # this request's prefill chunk
        self.waiting.append(request)

    def _tokens(self, request: Request) -> int:
        remaining = request.num_tokens - request.num_computed_tokens
        if remaining > 1 or request.num_output_tokens == 0:  # prefill: whole blocks until the last chunk
            return min(remaining, request.chunk_tokens)
        return 1 + self.spec  # decode: the sampled token and the drafts

    def preempt(self, request: Request) -> None:
        self.manager.free(request)
        self.running.remove(request)
        request.status, request.num_computed_tokens = RequestStatus.PREEMPTED, 0
        request.num_preemptions += 1
        self.waiting.insert(0, request)
        self.preempted.add(request.request_id)

    def finish(self, request: Request) -> None:
        self.manager.free(request)
        self.running.remove(request)

    def step(self, accepted: int = 0) -> list[int]:
        """One schedule + execute; `accepted` drafts of each decode are verified. Returns the ids to zero."""
        self.manager.new_step_starts()
        scheduled = []
        for request in list(self.running):
            if request not in self.running:  # preempted for an earlier one this step
                continue
            tokens = self._tokens(request)
            while self.manager.allocate_slots(request, tokens, num_lookahead_tokens=self.lookahead) is None:
                self.preempt(self.running[-1])
                if request not in self.running:
                    break
            else:
                scheduled.append((request, tokens))
        while self.waiting:
            request = self.waiting[0]
            blocks, hit = self.manager.get_computed_blocks(request)[:2]
            tokens = min(request.num_tokens - hit, request.chunk_tokens)
            if self.manager.allocate_slots(request, tokens, hit, blocks, num_lookahead_tokens=self.lookahead) is None:
                break
            check_hit(self.manager, request, blocks, hit)
            self.hits.append((request.request_id, hit))
            self.waiting.pop(0)
            request.status, request.num_computed_tokens = RequestStatus.RUNNING, hit
            self.running.append(request)
            scheduled.append((request, tokens))
        for request, tokens in scheduled:  # the model ran: verify drafts, sample
            decode = request.num_tokens - request.num_computed_tokens == 1 and request.num_output_tokens > 0
            request.num_computed_tokens += tokens
            if decode:
                kept = min(accepted, self.spec)
                request.num_computed_tokens -= self.spec - kept
                request.append_output_token_ids([7 + (request.num_tokens + i) % 97 for i in range(kept + 1)])
            elif request.num_computed_tokens == request.num_tokens:
                request.append_output_token_ids(11 + request.num_tokens % 89)
        return self.manager.take_new_block_ids()

    def used_blocks(self) -> int:
        pool = self.manager.block_pool
        return pool.num_gpu_blocks - pool.get_num_free_blocks()


def check_hit(manager, request: Request, blocks, hit: int) -> None:
    """A hit is block-aligned and every block it hands out holds this request's prefix, in its own group."""
    assert hit % manager.coordinator.scheduler_block_size == 0, hit
    for group_id, group_blocks in enumerate(blocks.blocks):
        size = manager.coordinator.single_type_managers[group_id].block_size
        for index, block in enumerate(group_blocks):
            if block.is_null:
                continue
            assert get_group_id(block.block_hash) == group_id
            assert get_block_hash(block.block_hash) == request.block_hashes[(index + 1) * size // manager.coordinator
                                                                          .block_pool.hash_block_size - 1]


def shared_stride(config) -> int:
    """Bytes per shared block: a tensor's block stride times its group's slots."""
    slots = getattr(config, "layer_slots", lambda name: 1)
    return max(t.block_stride * slots(t.layers[0]) for t in config.kv_cache_tensors)


def owner(block):
    """The block pool a block belongs to: vLLM 0.34.0 keeps a weak reference to it, 0.33.0 the pool itself."""
    return block.pool() if isinstance(block.pool, weakref.ref) else block.pool


def check(manager, config) -> None:
    """No byte is owned by two live blocks of different owners, and the carved pools' counters are the truth."""
    coordinator, stride = manager.coordinator, shared_stride(config)
    spans = []  # (start, end, key, group): a live block's bytes in the shared allocation
    for group_id, single in enumerate(coordinator.single_type_managers):
        per_block = getattr(single.block_pool, "per_block", 1)
        for blocks in single.req_to_blocks.values():
            for block in (b for b in blocks if not b.is_null):
                assert block.ref_cnt > 0 and owner(block) is single.block_pool, (group_id, block)
                start = block.block_id * stride // per_block
                spans.append((start, start + stride // per_block, (id(single.block_pool), block.block_id), group_id))
    for pool in getattr(coordinator.block_pool, "carved", ()):
        audit(pool)
        for lent, block in pool.lent.items():
            assert block.ref_cnt == 1 and block.block_id == lent
            spans.append((lent * stride, (lent + 1) * stride, ("lent", id(pool), lent), None))
    spans.sort()
    active: list[tuple] = []
    for span in spans:
        active = [a for a in active if a[1] > span[0]]
        for other in active:
            if not (other[2] == span[2] and other[3] == span[3] or _slot_in_its_block(span, other)
                    or _slot_in_its_block(other, span)):
                raise AssertionError(f"bytes owned twice: {other} and {span}")
        active.append(span)


def _slot_in_its_block(slot: tuple, lent: tuple) -> bool:
    """A carved pool's slot overlaps only the shared block lent to that pool (slots never span two blocks)."""
    return lent[2][0] == "lent" and slot[2][0] == lent[2][1]


def audit(pool) -> None:
    """Recount a carved pool from its slots; its free queue must hold exactly its free slots."""
    free = {id(b) for b in pool.free_block_queue.get_all_free_blocks()}
    clean_in_use = 0
    for lent, slots in pool.slots.items():
        live = sum(s.ref_cnt > 0 for s in slots)
        clean = sum(s.ref_cnt == 0 and s.block_hash is None for s in slots)
        assert (pool.live[lent], pool.clean[lent], lent in pool.idle) == (live, clean, live == 0), lent
        assert all((id(s) in free) == (s.ref_cnt == 0) for s in slots)
        clean_in_use += clean if live else 0
    assert pool.clean_in_use == clean_in_use
    assert len(free) == sum(pool.per_block - pool.live[b] for b in pool.slots)
    assert not {id(b) for b in pool.lent.values()} & {id(b) for b in pool.shared.free_block_queue.get_all_free_blocks()}
