"""Draft page packing (vllm/_fork/kv_pages.py) through the installed fork's own planning functions.

The layer-outer case goes through the edited `unify_kv_cache_spec_page_size`; the block-outermost case
through `pack_draft_groups` with upstream's stride function. The whole GLM-5.3-Flash + DFlash2 plan is in
test_glm5_kv_plan.py.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm._fork.kv_pages import pack_draft_groups
from vllm.v1.attention.backend import MultipleOf
from vllm.v1.core.kv_cache_planning import _get_kv_cache_bytes_per_block, unify_kv_cache_spec_page_size
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheGroupSpec,
    MLAAttentionSpec,
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


def test_layer_outer_draft_page_takes_four_times_the_tokens_before_padding():
    unified = unify_kv_cache_spec_page_size({"target": target(), "draft": window()})
    draft = unified["draft"]
    assert draft.block_size == 64 and draft.unpadded_page_size_bytes == 4 * 8192
    assert draft.page_size_bytes == unified["target"].page_size_bytes == 36864  # the rest is still padding


def test_a_target_window_spec_is_padded_as_upstream_does():
    # Not a draft: its block size may mean something else (Inkling's short-conv state), so it is left alone.
    unified = unify_kv_cache_spec_page_size({"target": target(), "conv": window(draft=False)})
    assert unified["conv"].block_size == 16 and unified["conv"].page_size_bytes == 36864


def test_packing_keeps_the_kernel_block_alignment_of_the_padded_page():
    # Kernel blocks of up to 32 tokens: block 64 would need 32-token strides (16,384 B) and block 48 16-token
    # ones (8,192 B); 36,864 is a multiple of neither, so only block 32 (alignment 1) fits.
    unified = unify_kv_cache_spec_page_size({"target": target(), "draft": window(block_stride_alignment=MultipleOf(32))})
    assert unified["draft"].block_size == 32 and unified["draft"].page_size_bytes == 36864


def test_exact_ratios_stay_upstream_business():
    # 8 target heads: the draft page divides it exactly, upstream scales the block itself (no padding, no hook).
    unified = unify_kv_cache_spec_page_size({"target": target(heads=8), "draft": window()})
    assert unified["draft"].block_size == 64 and unified["draft"].page_size_padded is None


def _group(names_specs: dict) -> KVCacheGroupSpec:
    return KVCacheGroupSpec(list(names_specs), UniformTypeKVCacheSpecs.from_specs(names_specs))


def test_block_outermost_draft_group_fills_the_stride_without_changing_it():
    layout = KVCacheLayout.BLHNC
    groups = [_group({f"t{i}": target() for i in range(3)}),  # 110,592 bytes per block: the stride
              _group({f"d{i}": window() for i in range(5)})]   # 40,960 bytes per block
    stride = _get_kv_cache_bytes_per_block(groups, layout)
    packed = pack_draft_groups(groups, layout)
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
    assert pack_draft_groups(groups, layout) == groups


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
    packed = pack_draft_groups(groups, layout)
    assert _get_kv_cache_bytes_per_block(packed, layout) == stride
    before, after = groups[1].kv_cache_spec, packed[1].kv_cache_spec
    assert after.block_size % before.block_size == 0
    ratio = after.block_size // before.block_size
    group_bytes = draft_layers * before.first_spec.page_size_bytes
    assert ratio * group_bytes <= stride
    if kernel is None:  # no alignment to keep: packed as far as the stride allows
        assert (ratio + 1) * group_bytes > stride


@pytest.mark.parametrize("heads", [1, 3, 5, 7])
def test_layer_outer_page_never_exceeds_the_common_page(heads):
    unified = unify_kv_cache_spec_page_size({"target": target(), "draft": window(heads=heads)})
    assert len({spec.page_size_bytes for spec in unified.values()}) == 1
    assert unified["draft"].unpadded_page_size_bytes <= unified["draft"].page_size_bytes
