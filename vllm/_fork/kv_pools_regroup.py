"""Mamba (KDA) layers regrouped for their own pools: unpadded states, in groups that fill whole slots of the stride.

The platform pads each Mamba state to the attention page and the planner then splits the state layers into as
many groups as fit the block stride (GLM-5.3-Flash, bf16: 34 KDA layers as 9/9/8/8 of 11-state blocks, 70-79 %
full). Every Mamba group takes the same number of blocks per request, so the bytes a request needs are the sum of
the groups' slot sizes. Unpadded and split by a small search over group sizes (no more groups than before), each
group fills a slot of its own pool: 12/12/6/4 states in slots of 1, 1, 1/2 and 1/3 stride (94 % full each).
"""

from __future__ import annotations

import math
import re
from typing import Any

from vllm._fork.kv_pages import block_stride as stride_of
from vllm._fork.kv_pages import pack_draft_groups, packing_disabled
from vllm._fork.kv_pools_plan import SLOT_ALIGNMENT, _unpadded, layer_specs, pools_apply, slots_per_block


def _natural(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _members(group: Any) -> dict:
    spec = group.kv_cache_spec
    return getattr(spec, "kv_cache_specs", None) or dict.fromkeys(group.layer_names, spec)


def best_split(num_layers: int, slot_bytes, max_groups: int) -> tuple[int, ...]:
    """Group sizes (largest first) of at most max_groups groups with the least total slot bytes; ties: fewer groups.

    slot_bytes(m) is the slot a group of m layers takes, or None when m layers exceed a block."""
    best: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {(0, 0): (0, ())}
    for groups in range(1, max_groups + 1):
        for layers in range(1, num_layers + 1):
            options = [(best[groups - 1, layers - m][0] + cost, best[groups - 1, layers - m][1] + (m,))
                       for m in range(1, layers + 1)
                       if (groups - 1, layers - m) in best and (cost := slot_bytes(m)) is not None]
            if options:
                best[groups, layers] = min(options)
    found = [(best[g, num_layers][0], g, best[g, num_layers][1]) for g in range(1, max_groups + 1)
             if (g, num_layers) in best]
    if not found:
        return ()
    return tuple(sorted(min(found)[2], reverse=True))


def regroup_state_groups(groups: list, layout: Any, vllm_config: Any) -> list:
    """The planner's groups with its all-Mamba groups re-split for their own pools, when that takes fewer bytes."""
    from vllm.v1.kv_cache_interface import KVCacheGroupSpec, MambaSpec, UniformTypeKVCacheSpecs

    # Only with VLLM_FORK_KV_POOLS=on: no self-test covers the KDA kernels on carved state slots yet.
    if packing_disabled() or not layout.is_block_outermost or not pools_apply(vllm_config, groups):
        return groups
    state = [i for i, g in enumerate(groups) if all(type(s) is MambaSpec for s in layer_specs(g.kv_cache_spec))]
    specs = {name: spec for i in state for name, spec in _members(groups[i]).items()}
    unpadded = {name: _unpadded(spec) for name, spec in specs.items()}
    if not state or len(set(unpadded.values())) != 1:  # one state shape, split freely
        return groups
    stride = stride_of(groups, layout)
    spec = next(iter(unpadded.values()))
    alignment = math.lcm(SLOT_ALIGNMENT, spec.get_block_stride_alignment())

    def slot(need: int) -> int | None:
        return stride // slots_per_block(need, stride, alignment) if need <= stride else None

    sizes = best_split(len(unpadded), lambda m: slot(m * spec.page_size_bytes), len(state))
    before = sum(slot(groups[i].kv_cache_spec.page_size_bytes) or stride for i in state)
    if not sizes or sum(slot(m * spec.page_size_bytes) for m in sizes) >= before:
        return groups
    names, regrouped, start = sorted(unpadded, key=_natural), [], 0
    for size in sizes:
        chunk = names[start:start + size]
        start += size
        regrouped.append(KVCacheGroupSpec(chunk, UniformTypeKVCacheSpecs.from_specs({n: unpadded[n] for n in chunk})))
    result = [g for i, g in enumerate(groups) if i not in state]
    result[state[0]:state[0]] = regrouped  # where the planner put its state groups
    return result if stride_of(result, layout) == stride else groups


def plan_pool_groups(groups: list, layout: Any, vllm_config: Any) -> list:
    """The fork's changes to the planner's block-outermost groups: state groups regrouped, draft groups packed."""
    groups = regroup_state_groups(groups, layout, vllm_config)
    return pack_draft_groups(groups, layout, vllm_config.cache_config.enable_prefix_caching,
                             vllm_config.kv_transfer_config)
