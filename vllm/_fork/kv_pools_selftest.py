"""KV pools' self-test: a carved group's own KV kernels must put a carved slot's bytes exactly where the plan says and
read them back exactly as they read a stock block.

For each carved attention group of a plan, a few shared blocks are laid out twice from the engine's own configs: stock
(the plan before carving) and carved (after it), each over a buffer filled with a sentinel byte. The same keys and
values go into stock block `b` and into the carved pool's last slot of lent block `b` (ids from the block pool's own
`slot_block_id`), through vLLM's own views (`create_kv_cache_views`, the carved config's `num_blocks_of`) and its own
write kernel (kv_pools_kernels.py). Where the bytes must land comes from the pools' design, not from the
views: slot `j` of block `b` is bytes `b * stride + j * stride / k` onward, holding what the stock block holds in its
first `stride / k` bytes; every other byte must still be the sentinel. Then the group's read kernel (causal, with the
group's window) reads both: the outputs must be bitwise equal, and close to attention computed from the keys
themselves (so a read that ignores the cache cannot pass). The kernels are the group's own (kv_pools_kernels.py); the
start-up self-test runs this on every worker (kv_pools_auto.py). Only plain full and sliding-window attention groups
are covered: any other carved group (Mamba/KDA states, the tail ring) is reported as not covered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from vllm._fork import kv_pools_blocks
from vllm._fork.kv_pools_kernels import AttentionKernels, NotCovered, reference_attention
from vllm._fork.vocabulary import SelfTestStatus

SHARED_BLOCKS = 4
SENTINEL = -77  # 0xB3: no float written by the kernels here has this byte pattern everywhere
# A correct read of float32 pages matches float32 attention to rounding; half-precision pages and kernels less well.
REFERENCE_TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}


@dataclass(frozen=True)
class GroupResult:
    """One carved group's comparison: passed, or the kernel that disagreed (or why none could be compared)."""

    group: int
    status: SelfTestStatus
    kernel: str = ""
    detail: str = ""

    def line(self) -> str:
        return f"KV group {self.group}: {self.kernel}: {self.detail}" if self.detail else f"KV group {self.group}"


def _tensor_of(config: Any, layer: str) -> Any:
    return next(t for t in config.kv_cache_tensors if layer in t.layers)


def spec_of(config: Any, group_id: int, layer: str) -> Any:
    """The KV spec of one layer of a group (a uniform group holds one per layer)."""
    spec = config.kv_cache_groups[group_id].kv_cache_spec
    return getattr(spec, "kv_cache_specs", {layer: spec})[layer]


def _mini(tensor: Any, layer: str, stride: int) -> Any:
    """`tensor`'s first layer over SHARED_BLOCKS shared blocks: its place inside a block kept, its region's start
    (layer-outermost layouts) dropped."""
    size = SHARED_BLOCKS * stride
    layer_stride = tensor.layer_stride if tensor.layer_stride < stride else size
    return replace(tensor, size=size, layers=[layer], layer_stride=layer_stride, offset=tensor.offset % stride)


def _views(config: Any, spec: Any, tensor: Any, layout: Any, raw: torch.Tensor) -> torch.Tensor:
    from vllm.v1.kv_cache_interface import create_kv_cache_views

    return create_kv_cache_views(raw, spec, config.num_blocks_of(tensor), layout, tensor)[0]


def _placed(stock_raw: torch.Tensor, block: int, slot: int, stride: int, slots: int) -> torch.Tensor:
    """The carved buffer the design implies: the stock block's first stride/k bytes at slot `slot` of `block`."""
    expected = torch.full_like(stock_raw, SENTINEL)
    width, base = stride // slots, block * stride
    expected[base + slot * width:base + (slot + 1) * width] = stock_raw[base:base + width]
    return expected


def _first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    differ = (got != want).nonzero()
    return f"{differ.numel()} bytes differ, the first at byte {int(differ[0])}"


def attention_spec(spec: Any) -> bool:
    """Plain full or sliding-window attention: the specs whose kernels the comparison runs (exact types)."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    return type(spec) in (FullAttentionSpec, SlidingWindowSpec)


def error_line(error: BaseException) -> str:
    """An error as the self-test's lines quote it: its type and its message's first line."""
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"


def _failed(group_id: int, kernel: str, detail: str) -> GroupResult:
    return GroupResult(group_id, SelfTestStatus.FAILED, kernel, detail)


def check_attention_group(stock: Any, carved: Any, group_id: int, layout: Any, device: Any,
                          kernels: AttentionKernels, seed: int = 0) -> GroupResult:
    """The write and read kernels on stock block b and on the carved pool's last slot of lent block b."""
    layer = carved.kv_cache_groups[group_id].layer_names[0]
    stock_spec, spec = spec_of(stock, group_id, layer), spec_of(carved, group_id, layer)
    stock_tensor = _tensor_of(stock, layer)
    stride, slots = stock_tensor.block_stride, carved.group_slots(group_id)
    mini_stock = replace(stock, num_blocks=SHARED_BLOCKS)
    mini_carved = replace(carved, num_blocks=SHARED_BLOCKS)
    stock_mini_tensor = _mini(stock_tensor, layer, stride)
    carved_mini_tensor = _mini(_tensor_of(carved, layer), layer, stride)
    block = SHARED_BLOCKS - 1
    slot_id = kv_pools_blocks.slot_block_id(block, slots - 1, slots)
    # One spare block past the views: a slot misplaced past the end lands on sentinels instead of out of bounds.
    raws = [torch.full(((SHARED_BLOCKS + 1) * stride,), SENTINEL, dtype=torch.int8, device=device) for _ in range(2)]
    stock_view = _views(mini_stock, stock_spec, stock_mini_tensor, layout, raws[0])
    carved_view = _views(mini_carved, spec, carved_mini_tensor, layout, raws[1])
    if carved_view.shape[0] <= slot_id:  # the last slot of the last shared block: the highest id the pool hands out
        return _failed(group_id, "views", f"the carved views address {carved_view.shape[0]} blocks; the pool hands "
                       f"out ids up to {slot_id} ({SHARED_BLOCKS} shared blocks x {slots} slots)")
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shape = (spec.block_size, spec.num_kv_heads, spec.head_size)
    key, value = (torch.randn(shape, generator=generator).to(device=device, dtype=spec.dtype) for _ in range(2))
    query = torch.randn((spec.block_size, kernels.num_heads, spec.head_size),
                        generator=generator).to(device=device, dtype=spec.dtype)
    positions = torch.arange(spec.block_size, device=device)
    kernels.write(stock_view, block * spec.block_size + positions, key, value)
    kernels.write(carved_view, slot_id * spec.block_size + positions, key, value)
    expected = _placed(raws[0], block, slots - 1, stride, slots)
    if not torch.equal(raws[1], expected):
        where = f"slot {slots - 1} of block {block} is bytes {block * stride + (slots - 1) * stride // slots} onward"
        return _failed(group_id, f"{kernels.backend} write",
                       f"{_first_difference(raws[1], expected)} ({where}, {stride // slots} bytes per slot)")
    stock_out, carved_out = kernels.read(stock_view, block, query), kernels.read(carved_view, slot_id, query)
    if not torch.equal(stock_out, carved_out):
        worst = float((stock_out.float() - carved_out.float()).abs().max())
        return _failed(group_id, f"{kernels.backend} read",
                       f"outputs differ from the stock block's by up to {worst:.3g}")
    want = reference_attention(kernels, query, key, value)
    error = float((carved_out.float() - want).abs().max())
    if error > REFERENCE_TOLERANCE.get(spec.dtype, 5e-2) * max(float(want.abs().max()), 1.0):
        return _failed(group_id, f"{kernels.backend} read", f"outputs differ from attention over the written keys by "
                       f"up to {error:.3g}: the read does not see the cache it was given")
    return GroupResult(group_id, SelfTestStatus.PASSED, kernels.backend)


def check_plan(stock: Any, carved: Any, layout: Any, device: Any, kernels_for: Any = None) -> list[GroupResult]:
    """Every carved group of `carved` (a PooledKVCacheConfig) against `stock`, the same plan before carving.

    `kernels_for(group_id, spec)` gives a group's AttentionKernels (raising NotCovered); by default TRITON_ATTN's."""
    kernels_for = kernels_for or (lambda group_id, spec: AttentionKernels("TRITON_ATTN", spec))
    results = []
    for group_id, group in enumerate(carved.kv_cache_groups):
        if carved.group_slots(group_id) == 1:
            continue
        spec = spec_of(carved, group_id, group.layer_names[0])
        try:
            if not attention_spec(spec):
                raise NotCovered(f"{type(spec).__name__}: no kernel comparison for this KV spec")
            results.append(check_attention_group(stock, carved, group_id, layout, device, kernels_for(group_id, spec)))
        except NotCovered as reason:
            results.append(GroupResult(group_id, SelfTestStatus.NOT_COVERED, "", str(reason)))
        except Exception as error:  # noqa: BLE001  any failure of the carved views or kernels is a finding
            results.append(_failed(group_id, "views and kernels", error_line(error)))
    return results
