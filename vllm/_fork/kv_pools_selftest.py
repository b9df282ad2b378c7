"""KV pools' self-test: a carved group's own KV kernels must put a carved slot's bytes exactly where the plan says and
read them back exactly as they read a stock block.

For each carved attention group of a plan, a few shared blocks are laid out twice from the engine's own configs: stock
(the plan before carving) and carved (after it), each over a buffer filled with a sentinel byte. The same keys and
values go into stock block `b` and into the carved pool's last slot of lent block `b` (ids from the block pool's own
`slot_block_id`), through vLLM's own views (`create_kv_cache_views`, the carved config's `num_blocks_of`) and its own
write kernel (`triton_reshape_and_cache_flash`). Where the bytes must land comes from the pools' design, not from the
views: slot `j` of block `b` is bytes `b * stride + j * stride / k` onward, holding what the stock block holds in its
first `stride / k` bytes; every other byte must still be the sentinel. Then vLLM's `unified_attention` (causal, with
the group's window) reads both and must give bitwise-equal outputs. Only plain full and sliding-window attention groups
are covered: any other carved group (Mamba/KDA states, the tail ring) and the block zeroer are reported as not covered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from vllm._fork import kv_pools_blocks

SHARED_BLOCKS = 4
SENTINEL = -77  # 0xB3: no float written by the kernels here has this byte pattern everywhere
QUERY_HEADS_PER_KV = 2


@dataclass(frozen=True)
class Finding:
    """One way a carved group's kernels disagree with the stock block (or could not be compared)."""

    group: int
    kernel: str
    detail: str
    covered: bool = True

    def line(self) -> str:
        return f"KV group {self.group}: {self.kernel}: {self.detail}"


def _tensor_of(config: Any, layer: str) -> Any:
    return next(t for t in config.kv_cache_tensors if layer in t.layers)


def _spec_of(config: Any, group_id: int, layer: str) -> Any:
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


def _split(view: torch.Tensor, head_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, H, N, 2*hs) as the Triton attention backend splits it: key and value caches (B, N, H, hs)."""
    key, value = view.transpose(1, 2).split(head_size, dim=-1)
    return key, value


def _write(view: torch.Tensor, spec: Any, block: int, key: torch.Tensor, value: torch.Tensor) -> None:
    from vllm.v1.attention.ops.triton_reshape_and_cache_flash import triton_reshape_and_cache_flash

    one = torch.ones((), dtype=torch.float32, device=view.device)
    slots = block * spec.block_size + torch.arange(key.shape[0], device=view.device)
    triton_reshape_and_cache_flash(key, value, *_split(view, spec.head_size), slots, "auto", one, one)


def _read(view: torch.Tensor, spec: Any, block: int, query: torch.Tensor) -> torch.Tensor:
    from vllm.v1.attention.ops.triton_unified_attention import unified_attention

    device, tokens = view.device, query.shape[0]
    window = getattr(spec, "sliding_window", None)
    out = torch.empty_like(query)
    ones = torch.ones(1, spec.num_kv_heads, device=device)
    key, value = _split(view, spec.head_size)
    unified_attention(q=query, k=key, v=value, out=out,
                      cu_seqlens_q=torch.tensor([0, tokens], dtype=torch.int32, device=device), max_seqlen_q=tokens,
                      seqused_k=torch.tensor([tokens], dtype=torch.int32, device=device), max_seqlen_k=tokens,
                      softmax_scale=spec.head_size ** -0.5, causal=True,
                      window_size=(window - 1, 0) if window else (-1, -1),
                      block_table=torch.tensor([[block]], dtype=torch.int32, device=device), softcap=0,
                      q_descale=None, k_descale=ones, v_descale=ones)
    return out


def _placed(stock_raw: torch.Tensor, block: int, slot: int, stride: int, slots: int) -> torch.Tensor:
    """The carved buffer the design implies: the stock block's first stride/k bytes at slot `slot` of `block`."""
    expected = torch.full_like(stock_raw, SENTINEL)
    width, base = stride // slots, block * stride
    expected[base + slot * width:base + (slot + 1) * width] = stock_raw[base:base + width]
    return expected


def _first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    differ = (got != want).nonzero()
    return f"{differ.numel()} bytes differ, the first at byte {int(differ[0])}"


def check_attention_group(stock: Any, carved: Any, group_id: int, layout: Any, device: Any,
                          seed: int = 0) -> list[Finding]:
    """The write and read kernels on stock block b and on the carved pool's last slot of lent block b."""
    layer = carved.kv_cache_groups[group_id].layer_names[0]
    stock_spec, spec = _spec_of(stock, group_id, layer), _spec_of(carved, group_id, layer)
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
    last_id = kv_pools_blocks.slot_block_id(SHARED_BLOCKS - 1, slots - 1, slots)
    if carved_view.shape[0] <= last_id:
        return [Finding(group_id, "views", f"the carved views address {carved_view.shape[0]} blocks; the pool hands "
                        f"out ids up to {last_id} ({SHARED_BLOCKS} shared blocks x {slots} slots)")]
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shape = (spec.block_size, spec.num_kv_heads, spec.head_size)
    key, value = (torch.randn(shape, generator=generator).to(device=device, dtype=spec.dtype) for _ in range(2))
    query = torch.randn((spec.block_size, spec.num_kv_heads * QUERY_HEADS_PER_KV, spec.head_size),
                        generator=generator).to(device=device, dtype=spec.dtype)
    _write(stock_view, stock_spec, block, key, value)
    _write(carved_view, spec, slot_id, key, value)
    expected = _placed(raws[0], block, slots - 1, stride, slots)
    if not torch.equal(raws[1], expected):
        where = f"slot {slots - 1} of block {block} is bytes {block * stride + (slots - 1) * stride // slots} onward"
        return [Finding(group_id, "triton_reshape_and_cache_flash",
                        f"{_first_difference(raws[1], expected)} ({where}, {stride // slots} bytes per slot)")]
    stock_out, carved_out = _read(stock_view, stock_spec, block, query), _read(carved_view, spec, slot_id, query)
    if not torch.equal(stock_out, carved_out):
        worst = float((stock_out.float() - carved_out.float()).abs().max())
        return [Finding(group_id, "unified_attention", f"outputs differ from the stock block's by up to {worst:.3g}")]
    return []


def check_plan(stock: Any, carved: Any, layout: Any, device: Any) -> list[Finding]:
    """Every carved group of `carved` (a PooledKVCacheConfig) against `stock`, the same plan before carving."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    findings = []
    for group_id, group in enumerate(carved.kv_cache_groups):
        if carved.group_slots(group_id) == 1:
            continue
        spec = _spec_of(carved, group_id, group.layer_names[0])
        if type(spec) not in (FullAttentionSpec, SlidingWindowSpec):
            findings.append(Finding(group_id, type(spec).__name__, "no kernel comparison covers it", covered=False))
            continue
        try:
            findings += check_attention_group(stock, carved, group_id, layout, device)
        except Exception as error:  # noqa: BLE001  any failure of the carved views or kernels is a finding
            first = (str(error).splitlines() or [""])[0]
            findings.append(Finding(group_id, "views and kernels", f"{type(error).__name__}: {first}"))
    return findings
