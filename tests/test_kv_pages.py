"""Draft group packing (vllm/_fork/kv_pages.py) against upstream's own block-stride function and spec classes.

The whole GLM-5.3-Flash + DFlash2 plan, through the edited `_get_packed_kv_cache_groups`, is in
test_glm5_kv_plan.py.
"""

from __future__ import annotations

import logging
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm._fork.kv_pages import DISABLE_ENV, POOLS_ENV, pack_draft_groups
from vllm.config.kv_transfer import KVTransferConfig
from vllm.v1.attention.backend import MultipleOf
from vllm.v1.core.kv_cache_planning import _get_kv_cache_bytes_per_block
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    FullAttentionSpec,
    KVCacheGroupSpec,
    MLAAttentionSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from vllm.v1.kv_cache_layout import KVCacheLayout

BF16 = torch.bfloat16


def target(heads: int = 9, block: int = 16) -> FullAttentionSpec:
    # 9 heads x (64 + 64) x 2 bytes = 2,304 bytes per token: 36,864-byte pages at block 16.
    return FullAttentionSpec(block_size=block, num_kv_heads=heads, head_size=64, dtype=BF16)


def window(heads: int = 2, block: int = 16, draft: bool = True, **extra) -> SlidingWindowSpec:
    # 2 heads: 512 bytes per token, 8,192-byte pages at block 16 (4.5 of them in a target page).
    return SlidingWindowSpec(block_size=block, num_kv_heads=heads, head_size=64, dtype=BF16, sliding_window=128,
                             is_draft=draft, **extra)


def _group(names_specs: dict) -> KVCacheGroupSpec:
    return KVCacheGroupSpec(list(names_specs), UniformTypeKVCacheSpecs.from_specs(names_specs))


def test_block_outermost_draft_group_fills_the_stride_without_changing_it():
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}),  # 110,592 bytes per block: the stride
              _group({f"d{i}": window() for i in range(5)})]   # 40,960 bytes per block
    stride = _get_kv_cache_bytes_per_block(groups, layout)
    packed = pack_draft_groups(groups, layout, prefix_caching=False)
    assert packed[0] is groups[0]
    assert packed[1].kv_cache_spec.block_size == 32  # 2 x 40,960 fits, 3 x does not
    assert {spec.block_size for spec in packed[1].kv_cache_spec.kv_cache_specs.values()} == {32}
    assert packed[1].layer_names == groups[1].layer_names
    assert _get_kv_cache_bytes_per_block(packed, layout) == stride


def test_block_outermost_groups_that_are_not_all_draft_attention_stay():
    layout = KVCacheLayout.BLHNC
    mla = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=BF16, is_draft=True)
    groups = [_group({f"t{i}": target() for i in range(3)}),
              _group({"d0": window(), "w0": window(draft=False)}),
              _group({"m0": mla})]
    assert pack_draft_groups(groups, layout, prefix_caching=False) == groups


@settings(max_examples=60, deadline=None)
@given(target_heads=st.integers(1, 16), target_layers=st.integers(1, 8), draft_heads=st.integers(1, 16),
       draft_layers=st.integers(1, 8), kernel=st.sampled_from([None, 16, 32, 64, 256]))
def test_block_outermost_packing_never_widens_the_stride(target_heads, target_layers, draft_heads, draft_layers,
                                                         kernel):
    layout = KVCacheLayout.BLHNC
    alignment = {"block_stride_alignment": MultipleOf(kernel)} if kernel else {}
    groups = [_group({f"t{i}": target(heads=target_heads) for i in range(target_layers)}),
              _group({f"d{i}": window(heads=draft_heads, **alignment) for i in range(draft_layers)})]
    stride = _get_kv_cache_bytes_per_block(groups, layout)
    packed = pack_draft_groups(groups, layout, prefix_caching=False)
    assert _get_kv_cache_bytes_per_block(packed, layout) == stride
    before, after = groups[1].kv_cache_spec, packed[1].kv_cache_spec
    assert after.block_size % before.block_size == 0
    ratio = after.block_size // before.block_size
    group_bytes = draft_layers * before.first_spec.page_size_bytes
    assert ratio * group_bytes <= stride
    if kernel is None:  # no alignment to keep: packed as far as the stride allows
        assert (ratio + 1) * group_bytes > stride


def test_nothing_is_packed_with_prefix_caching():
    # Cache hits align to every cacheable group's block size: a 2x draft block would halve hit granularity.
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    assert pack_draft_groups(groups, layout, prefix_caching=True) == groups


def test_kernel_block_alignment_limits_the_multiple():
    # One 36,864-byte target layer sets the stride; 4 draft blocks of 16 tokens would fit. With kernel blocks of
    # up to 32 tokens, block 64 needs the stride in 32-token pages (16,384 B) and block 48 in 16-token pages
    # (8,192 B): 36,864 is a multiple of neither. Block 32 is one whole kernel block (no alignment).
    layout = KVCacheLayout.BLHNC
    groups = [_group({"t0": target()}), _group({"d0": window(block_stride_alignment=MultipleOf(32))})]
    stride = _get_kv_cache_bytes_per_block(groups, layout)
    packed = pack_draft_groups(groups, layout, prefix_caching=False)
    assert _get_kv_cache_bytes_per_block(packed, layout) == stride == 36864
    assert packed[1].kv_cache_spec.block_size == 32


# Draft specs of the same 8,192-byte page as window() whose block size is not (only) tokens per block: a
# plain draft group of that page is packed 2x next to three target layers (first test), these must stay.
COMMON = dict(block_size=16, dtype=BF16, is_draft=True)
NOT_PLAIN = {
    "circular buffer (block = ring capacity)": lambda: CircularBufferSpec(num_kv_heads=2, head_size=64, **COMMON),
    "sliding-window MLA": lambda: SlidingWindowMLASpec(num_kv_heads=1, head_size=256, sliding_window=128,
                                                       **dict(COMMON, dtype=torch.float32) | {"block_size": 8}),
    "MLA": lambda: MLAAttentionSpec(num_kv_heads=1, head_size=512, **COMMON),
    "chunked local": lambda: ChunkedLocalAttentionSpec(num_kv_heads=2, head_size=64, attention_chunk_size=64,
                                                      **COMMON),
    "R-SWA": lambda: RSWASpec(num_kv_heads=2, head_size=64, rswa_window=64, **COMMON),
    "sink full attention": lambda: SinkFullAttentionSpec(num_kv_heads=2, head_size=64, sink_len=4, **COMMON),
    "several tokens per state": lambda: window(tokens_per_state=4),
    "fractional tokens per state": lambda: window(tokens_per_state=Fraction(1, 2), block=8),
    "head slots published by the backend": lambda: window(num_head_slots=2),
    "padded page": lambda: window(page_size_padded=8192 + 512),
}


@pytest.mark.parametrize("kind", sorted(NOT_PLAIN))
def test_only_plain_full_or_window_draft_specs_are_packed(kind):
    layout = KVCacheLayout.BLHNC
    spec = NOT_PLAIN[kind]()
    assert spec.is_draft and spec.page_size_bytes * 2 <= 110592  # room to pack, were it plain
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({"d0": spec})]
    assert pack_draft_groups(groups, layout, prefix_caching=False) == groups


@pytest.mark.parametrize("plain", [window, lambda: FullAttentionSpec(num_kv_heads=2, head_size=64, **COMMON)])
def test_plain_draft_specs_of_the_same_page_are_packed(plain):
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({"d0": plain()})]
    assert pack_draft_groups(groups, layout, prefix_caching=False)[1].kv_cache_spec.block_size > 16


def test_nothing_is_packed_with_a_kv_connector(caplog):
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    connector = KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both")
    with caplog.at_level(logging.INFO, logger="vllm._fork.kv_pages"):
        assert pack_draft_groups(groups, layout, False, connector) == groups
    lines = [r.getMessage() for r in caplog.records if r.name == "vllm._fork.kv_pages"]
    assert len(lines) == 1 and "NixlConnector" in lines[0], lines
    assert pack_draft_groups(groups, layout, False, None)[1].kv_cache_spec.block_size == 32


@pytest.mark.parametrize("value, packed", [("1", False), ("true", False), ("0", True), ("", True)])
def test_env_switch_turns_packing_off(monkeypatch, value, packed):
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    monkeypatch.setenv(DISABLE_ENV, value)
    assert (pack_draft_groups(groups, layout, prefix_caching=False) != groups) is packed


@pytest.mark.parametrize("value, packed", [(None, False), ("", False), ("auto", False), ("off", False), ("on", True),
                                           ("ON", True)])
def test_the_planners_own_changes_need_the_pools_opted_in(monkeypatch, value, packed):
    """No self-test covers the draft packing: by default (auto, as when VLLM_FORK_KV_POOLS is unset) and with `off`
    the planner plans as stock's; only `on` packs."""
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    if value is None:
        monkeypatch.delenv(POOLS_ENV, raising=False)
    else:
        monkeypatch.setenv(POOLS_ENV, value)
    assert (pack_draft_groups(groups, layout, prefix_caching=False) != groups) is packed


def test_opting_in_and_the_stock_switch_together_plan_stock(monkeypatch):
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    monkeypatch.setenv(POOLS_ENV, "on")
    monkeypatch.setenv(DISABLE_ENV, "1")
    assert pack_draft_groups(groups, KVCacheLayout.BLHNC, prefix_caching=False) == groups


def test_a_misspelled_pools_switch_is_refused_naming_it(monkeypatch):
    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.setenv(POOLS_ENV, "yes please")
    with pytest.raises(ValueError, match="VLLM_FORK_KV_POOLS='yes please': use one of 'auto', 'on', 'off'"):
        pack_draft_groups(groups, KVCacheLayout.BLHNC, prefix_caching=False)


@pytest.mark.parametrize("version, proven", [("0.33.0", True), ("0.33.0+fork", True), ("0.33.2", True),
                                             ("0.32.0+fork", True), ("0.34.0+fork", True), ("0.34.0", True),
                                             ("0.35.0", False), ("0.31.1", False), ("not a version", False)])
def test_pools_are_proven_on_the_releases_they_were_tested_on_only(version, proven):
    from vllm._fork.kv_pages import pools_proven

    assert pools_proven(version) is proven


def test_opting_in_on_an_unproven_release_keeps_the_stock_pools_and_says_so_once(monkeypatch, caplog):
    """VLLM_FORK_KV_POOLS=on on a release the pools were not measured on: pools_apply refuses (so no group is
    regrouped or carved) with one warning line; the draft packing, checked above against this release's own
    block-stride function, still applies."""
    import types

    import vllm
    from vllm._fork import kv_pages, kv_pools_plan

    groups = [_group({f"t{i}": target() for i in range(3)}), _group({f"d{i}": window() for i in range(5)})]
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.setenv(POOLS_ENV, "on")
    monkeypatch.setattr(vllm, "__version__", "0.35.0+fork")
    monkeypatch.setattr(kv_pages, "_said_unproven", False)
    config = types.SimpleNamespace(kv_transfer_config=None)  # pools_apply must refuse before reading anything else
    with caplog.at_level(logging.WARNING, logger=kv_pages.__name__):
        assert kv_pools_plan.pools_apply(config, groups) is False
        assert kv_pools_plan.pools_apply(config, groups) is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [("VLLM_FORK_KV_POOLS=on: KV pools per page size were built and tested on vLLM 0.32-0.34's "
                         "planners only and are not ported to vLLM 0.35.0+fork; its stock KV pool is kept "
                         "(docs/kv-pools.md)")]
    assert pack_draft_groups(groups, KVCacheLayout.BLHNC, prefix_caching=False) != groups


@pytest.mark.parametrize(("backend", "per_kind", "carved"), [
    (None, {}, True),
    ("TRITON_ATTN", {}, True),
    ("FLEX_ATTENTION", {}, False),
    (None, {"sliding_window": "FLEX_ATTENTION"}, False),
    ("FLASHINFER", {}, False),
    ("CUSTOM", {}, False),
])
def test_a_forced_attention_backend_the_kernel_comparison_does_not_cover_keeps_the_stock_plan(
        monkeypatch, caplog, backend, per_kind, carved):
    """FLEX_ATTENTION sizes its block map by the shared block count, which a carved pool's ids overrun: forced (as a
    whole or per KV kind), it and any backend outside CARVED_BACKENDS keep stock's plan, with one line saying why."""
    import types

    from vllm._fork import kv_pools_plan
    from vllm._fork.vocabulary import PoolsMode
    from vllm.config.attention import AttentionConfig
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    attention = AttentionConfig(backend=backend and AttentionBackendEnum[backend],
                                backend_per_kind={kind: AttentionBackendEnum[name] for kind, name in per_kind.items()})
    monkeypatch.setattr(kv_pools_plan, "pools_ported", lambda: True)
    monkeypatch.setattr(kv_pools_plan, "pools_mode", lambda: PoolsMode.ON)
    # Only the backend rule is asked here: every later rule answers "may carve".
    monkeypatch.setattr(kv_pools_plan, "_fine_grained_hits", lambda *args: False)
    monkeypatch.setattr(kv_pools_plan, "_cpu_zeroes_slots_by_shared_id", lambda *args: False)
    parallel = types.SimpleNamespace(pipeline_parallel_size=1, decode_context_parallel_size=1)
    config = types.SimpleNamespace(attention_config=attention, kv_transfer_config=None, parallel_config=parallel)
    with caplog.at_level(logging.INFO, logger=kv_pools_plan.__name__):
        assert kv_pools_plan.pools_apply(config, [_group({"t0": target()})]) is carved
    said = [r.getMessage() for r in caplog.records if "not one whose kernels were compared" in r.getMessage()]
    assert len(said) == (0 if carved else 1)
