"""Draft KV groups packed into the block stride vLLM pads them to: more tokens per block, fewer blocks per request.

In block-outermost layouts every KV group's block costs the widest group's bytes. GLM-5.3-Flash + DFlash2:
the drafter's window group fills 22 % of each block and pays the rest as padding. With k times the tokens per
block the same stride holds k times the window, so the drafter takes k times fewer blocks per request.
Only all-draft groups are packed: their block size means nothing but tokens per block, while some target specs
give it other meanings (Inkling's short-conv state is a SlidingWindowSpec whose block is the conv kernel).
Only without prefix caching: cache hits align to the least common multiple of the groups' block sizes, so a 4x
draft block would make hits 4x coarser, a trade-off left to whoever turns prefix caching off.
Every candidate must leave the block stride and its alignment exactly as they were.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any


def _packable(spec: Any) -> bool:
    from vllm.v1.kv_cache_interface import AttentionSpec, MLAAttentionSpec

    return (getattr(spec, "is_draft", False) and isinstance(spec, AttentionSpec)
            and not isinstance(spec, MLAAttentionSpec) and spec.page_size_padded is None)


def _scaled(spec: Any, ratio: int) -> Any:
    return spec.copy_with_new_block_size(spec.block_size * ratio)


def pack_draft_groups(groups: list, layout: Any, prefix_caching: bool) -> list:
    """Each all-draft group at the largest block multiple that keeps the block stride; none with prefix caching."""
    from vllm.v1.core.kv_cache_planning import _get_kv_cache_bytes_per_block as stride_of
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    if prefix_caching:
        return groups
    stride = stride_of(groups, layout)
    packed = list(groups)
    for index, group in enumerate(groups):
        # _get_packed_kv_cache_groups builds every group as per-layer UniformTypeKVCacheSpecs.
        specs = getattr(group.kv_cache_spec, "kv_cache_specs", None)
        if not specs or not all(_packable(spec) for spec in specs.values()):
            continue
        group_bytes = sum(spec.page_size_bytes for spec in specs.values())
        for ratio in range(stride // group_bytes, 1, -1):
            scaled = UniformTypeKVCacheSpecs.from_specs({name: _scaled(spec, ratio) for name, spec in specs.items()})
            candidate = packed[:index] + [replace(group, kv_cache_spec=scaled)] + packed[index + 1:]
            if stride_of(candidate, layout) == stride:  # same pool geometry for every other group
                packed = candidate
                break
    return packed
