"""KV pools per page size, planning side: a group whose pages are narrower than the block stride gets its own pool.

vLLM gives every KV group one block stride, the widest group's bytes per block (block-outermost layouts) or the
widest layer page (layer-outermost layouts, where narrower attention pages are padded up to it). A narrower group
pays the difference as padding on every block. Here such a group gets k slots per block instead: its own block
pool, block ids `carrier * k + j`, and per-layer views whose block stride is `stride / k`. Its slots live inside
blocks that the shared pool lends it on demand (vllm/_fork/kv_pools_blocks.py), so memory moves between pools as
the load changes and no fixed split is ever made. Block sizes stay as they are: prefix-cache hits keep their
granularity. The backing allocation, its size and the number of shared blocks stay as stock plans them.

Only plain full, sliding-window, circular-buffer and Mamba specs are carved (exact types; MLA indexes whole token
rows, and a spec with a kernel-block alignment has its views remapped by its backend). Never with a forced attention
backend outside CARVED_BACKENDS, a KV connector, HiSparse, context or pipeline parallelism, or prefix hits finer
than a block (their copy-on-write copies name blocks of one pool to every layer), nor on a vLLM release the pools
were not proven on (kv_pages.PROVEN_RELEASES). By default (VLLM_FORK_KV_POOLS=auto) only the attention groups whose
kernels pass the start-up self-test on every worker are carved (kv_pools_auto.py); `on` carves every carvable group
without it; `off` or VLLM_FORK_DISABLE_KV_PACKING=1 plans exactly as stock vLLM.
"""

from __future__ import annotations

import logging
import math
from dataclasses import fields, replace
from typing import Any

from vllm._fork.kv_pages import pools_mode, pools_ported
from vllm._fork.vocabulary import PoolsMode

logger = logging.getLogger(__name__)

# Every slot starts on 64 bytes: TMA descriptors and Triton's vectorized loads need 16-byte aligned bases and strides.
SLOT_ALIGNMENT = 64


def _kv():
    from vllm.v1 import kv_cache_interface

    return kv_cache_interface


def slots_per_block(need: int, stride: int, alignment: int = SLOT_ALIGNMENT) -> int:
    """The most slots of at least `need` bytes that `stride` splits into evenly, each a multiple of `alignment`."""
    best = 1
    for k in range(2, stride // max(need, 1) + 1):
        if stride % k == 0 and (stride // k) % alignment == 0:
            best = k
    return best


def layer_specs(spec: Any) -> list:
    return list(getattr(spec, "kv_cache_specs", {"": spec}).values())


def carvable(spec: Any) -> bool:
    """Specs whose block is only tokens (or one state) per page, read through per-layer views by block id."""
    kv = _kv()
    # Exact types: MLA (flat token rows), hidden-state caches, R-SWA, sinks, HiSparse and the rest keep the stride.
    if type(spec) not in (kv.FullAttentionSpec, kv.SlidingWindowSpec, kv.CircularBufferSpec, kv.MambaSpec):
        return False
    # A backend with fixed kernel blocks (an alignment of MultipleOf kernel-block tokens) remaps the group's views by
    # kernel block; keep those as they are. A byte alignment (0.34.0's MambaSpec: its state alignment) only constrains
    # the stride, which the slot alignment honours (carve_kv_cache_config).
    return not _kernel_blocks(getattr(spec, "block_stride_alignment", None)) and spec.has_layer_views


def _kernel_blocks(alignment: Any) -> bool:
    return alignment is not None and not isinstance(alignment, int)


# Attention backends whose kernels address a carved group's views by their strides and block ids, and for which the
# start-up self-test has a comparison (kv_pools_kernels.py): with VLLM_FORK_KV_POOLS=auto a group is carved only after
# its own kernels pass it on every worker. A forced other one keeps the stock plan even with `on`: FLEX_ATTENTION sizes
# its block map by the shared block count, which a carved pool's ids (count x k) overrun.
CARVED_BACKENDS = frozenset({"FLASH_ATTN", "TRITON_ATTN", "CPU_ATTN"})


def forced_backends(vllm_config: Any) -> set[str]:
    """The attention backends the user forced (--attention-backend and its per-kind overrides), by name."""
    attention = getattr(vllm_config, "attention_config", None)
    forced = [getattr(attention, "backend", None), *(getattr(attention, "backend_per_kind", None) or {}).values()]
    return {getattr(backend, "name", str(backend)) for backend in forced if backend is not None}


def pools_apply(vllm_config: Any, groups: list) -> bool:
    """Whether this deployment may carve pools at all (the reasons it may not are in the module docstring)."""
    if pools_mode() is PoolsMode.OFF or not groups or not pools_ported():
        return False
    if uncovered := sorted(forced_backends(vllm_config) - CARVED_BACKENDS):
        logger.info("KV pools not carved: the %s attention backend is not one whose kernels were compared on "
                    "carved slots (%s)", ", ".join(uncovered), ", ".join(sorted(CARVED_BACKENDS)))
        return False
    parallel = vllm_config.parallel_config
    if vllm_config.kv_transfer_config is not None:
        logger.info("KV pools not carved: a KV connector moves blocks by the one shared block stride")
        return False
    if getattr(vllm_config.attention_config, "hisparse_config", None) is not None:
        return False
    if (parallel.pipeline_parallel_size, parallel.decode_context_parallel_size,
            getattr(parallel, "prefill_context_parallel_size", 1)) != (1, 1, 1):
        return False
    return not _fine_grained_hits(vllm_config, groups) and not _cpu_zeroes_slots_by_shared_id(groups)


def _cpu_zeroes_slots_by_shared_id(groups: list) -> bool:
    """The CPU runner zeroes new blocks by indexing each view with the scheduler's ids (shared blocks for a carved
    pool), which addresses slots; it zeroes at all only with Mamba layers or mixed KV precision."""
    from vllm.platforms import current_platform

    kv = _kv()
    if not current_platform.is_cpu():
        return False
    specs = [spec for group in groups for spec in layer_specs(group.kv_cache_spec)]
    precisions = {(spec.dtype, getattr(spec, "kv_quant_mode", None)) for spec in specs
                  if isinstance(spec, kv.AttentionSpec)}
    return any(isinstance(spec, kv.MambaSpec) for spec in specs) or len(precisions) > 1


def _fine_grained_hits(vllm_config: Any, groups: list) -> bool:
    """Prefix hits inside a block: the partial-hit copies would name one pool's blocks to every layer."""
    from vllm.v1.core.kv_cache_utils import partial_hash_hits_enabled

    cache = vllm_config.cache_config
    if not cache.enable_prefix_caching:
        return False
    sizes = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
    hash_block = (getattr(cache, "prefix_match_unit", None) or math.gcd(*sizes)) if sizes else 0
    return bool(hash_block) and partial_hash_hits_enabled(groups, hash_block)


def _group_need(tensors: list, specs: list, block_outermost: bool) -> int:
    """Bytes the group's layers take within one block stride."""
    if block_outermost:  # layers side by side inside each block
        return max(t.offset + len(t.layers) * t.layer_stride for t in tensors)
    return max(_unpadded(spec).page_size_bytes for spec in specs)  # each layer in its own region


def _unpadded(spec: Any) -> Any:
    return replace(spec, page_size_padded=None) if getattr(spec, "page_size_padded", None) else spec


def _unpadded_group_spec(spec: Any) -> Any:
    kv = _kv()
    if isinstance(spec, kv.UniformTypeKVCacheSpecs):
        return replace(spec, kv_cache_specs={n: _unpadded(s) for n, s in spec.kv_cache_specs.items()})
    return _unpadded(spec)


def carve_kv_cache_config(config: Any, layout: Any, only: set[int] | None = None) -> Any:
    """The config with each narrow group's tensors strided by its slots (of the groups in `only`, when given); the
    config itself when none is narrow."""
    if getattr(config, "slots_per_block", None) is not None or len(config.kv_cache_groups) < 2:
        return config
    tensors, groups, slots = list(config.kv_cache_tensors), list(config.kv_cache_groups), []
    for group_id, group in enumerate(groups):
        names = set(group.layer_names)
        owned = [i for i, t in enumerate(tensors) if names.intersection(t.layers)]
        specs = layer_specs(group.kv_cache_spec)
        strides = {tensors[i].block_stride for i in owned}
        k = 1
        wanted = only is None or group_id in only
        if (owned and wanted and len(strides) == 1 and not group.host_resident and all(map(carvable, specs))
                and all(names.issuperset(tensors[i].layers) for i in owned)):
            stride = strides.pop()
            alignment = math.lcm(SLOT_ALIGNMENT, *(s.get_block_stride_alignment() for s in specs))
            k = slots_per_block(_group_need([tensors[i] for i in owned], specs, layout.is_block_outermost), stride,
                                alignment)
        if k > 1:
            for i in owned:
                tensors[i] = replace(tensors[i], block_stride=tensors[i].block_stride // k)
            if not layout.is_block_outermost:  # the padding is exactly what the slots take back
                groups[group_id] = replace(group, kv_cache_spec=_unpadded_group_spec(group.kv_cache_spec))
        slots.append(k)
    if all(k == 1 for k in slots):
        return config
    from vllm._fork.kv_pools_config import PooledKVCacheConfig

    given = {f.name: getattr(config, f.name) for f in fields(config) if f.init}
    pooled = PooledKVCacheConfig(**given | {"kv_cache_tensors": tensors, "kv_cache_groups": groups,
                                            "slots_per_block": tuple(slots)})
    for field in fields(config):  # fields resolved after construction (0.34.0: needs_kv_cache_zeroing) stay resolved
        if not field.init:
            setattr(pooled, field.name, getattr(config, field.name))
    return pooled


def pools_pending(vllm_config: Any, config: Any) -> bool:
    """Whether, by default (auto), the engine would self-test pools on this stock plan before carving it (not where
    the plan zeroes new blocks: kv_pools_auto.py keeps those stock without asking)."""
    from vllm._fork.kv_pools_auto import zeroes_new_blocks

    if (pools_mode() is not PoolsMode.AUTO or zeroes_new_blocks(config)
            or not pools_apply(vllm_config, config.kv_cache_groups)):
        return False
    return carve_kv_cache_config(config, vllm_config.cache_config.get_resolved_kv_cache_layout()) is not config


def carve_kv_cache_configs(vllm_config: Any, configs: list, executor: Any = None) -> list:
    """Every worker's config carved alike (the engine core's hook, after vLLM planned them). In auto mode only the
    groups whose kernels pass the self-test on every worker of `executor` are carved, with `on` those whose layers
    run on CARVED_BACKENDS there (kv_pools_auto.py)."""
    if not configs or not pools_apply(vllm_config, configs[0].kv_cache_groups):
        return configs
    layout = vllm_config.cache_config.get_resolved_kv_cache_layout()
    carved = [carve_kv_cache_config(config, layout) for config in configs]
    if carved[0] is configs[0]:
        return configs
    slotted = {group for group, k in enumerate(carved[0].slots_per_block) if k > 1}
    if pools_mode() is PoolsMode.AUTO:
        from vllm._fork.kv_pools_auto import self_tested_groups

        keep = self_tested_groups(executor, configs[0], carved[0], layout)
    elif executor is not None:  # on: no self-test, but no group on a backend the pools do not know either
        from vllm._fork.kv_pools_auto import groups_on_other_backends

        other = groups_on_other_backends(executor, carved[0], CARVED_BACKENDS)
        keep = None if other is None else slotted - other
    else:  # planned without an executor (the benchmarks): every carvable group
        keep = slotted
    if not keep:
        return configs
    if keep != slotted:
        carved = [carve_kv_cache_config(config, layout, keep) for config in configs]
    logger.info("KV pools per page size: slots per shared block by KV group %s", carved[0].slots_per_block)
    return carved


def pooled_blocks_per_request(config: Any, group: Any, required: int) -> float:
    """A group's whole blocks per request in shared blocks: k slots share one (capacity formula)."""
    if getattr(config, "slots_per_block", None) is None or not group.layer_names:
        return required
    return required / config.layer_slots(group.layer_names[0])
