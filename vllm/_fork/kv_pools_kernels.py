"""An attention group's own KV kernels, as the pools' self-test runs them on one block: write a block's keys and
values, read them back for one request whose keys are that block.

In the engine the write is the layer's own `impl.do_kv_cache_update` (the call the model runner makes every step, with
the layer's KV dtype and scales) and the read is its backend's attention kernel with the layer's scale, window and
softcap. Without a layer (tests/scripts/kv_pools_kernel_check.py) both are the backend's kernels called directly
(TRITON_ATTN's or FLASH_ATTN's write op, its read kernel). Backends without a
reader here, and quantized KV caches, raise NotCovered: their groups stay stock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

QUERY_HEADS_PER_KV = 2  # without a layer: grouped queries, as most targets have


class NotCovered(Exception):
    """The self-test has no comparison for this group's kernels."""


@dataclass
class AttentionKernels:
    """One attention group's write and read kernels (`layer` None: the backend's kernels called directly)."""

    backend: str
    spec: Any
    layer: Any = None
    isa: str | None = None  # CPU_ATTN's instruction set, as its metadata builder picks it
    fa_version: int | None = None  # FLASH_ATTN's kernel generation (the layer's own, where there is one)

    def __post_init__(self) -> None:
        if self.backend not in _READERS:
            raise NotCovered(f"{self.backend}: no kernel comparison for this attention backend")
        if self.layer is not None and self.layer.impl.kv_cache_dtype != "auto":
            raise NotCovered(f"{self.layer.impl.kv_cache_dtype} KV cache: no kernel comparison for quantized pages")
        if self.layer is not None and self.backend == "FLASH_ATTN":
            self.fa_version = self.layer.impl.vllm_flash_attn_version

    @property
    def num_heads(self) -> int:
        return self.layer.impl.num_heads if self.layer is not None else self.spec.num_kv_heads * QUERY_HEADS_PER_KV

    @property
    def scale(self) -> float:
        return float(self.layer.impl.scale) if self.layer is not None else self.spec.head_size ** -0.5

    @property
    def softcap(self) -> float:
        return float(getattr(self.layer.impl, "logits_soft_cap", None) or 0) if self.layer is not None else 0.0

    @property
    def window(self) -> int | None:
        """Keys a query sees, itself included (None: all before it)."""
        return getattr(self.spec, "sliding_window", None)

    def write(self, view: torch.Tensor, slots: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        if self.layer is not None:
            self.layer.impl.do_kv_cache_update(self.layer, key, value, view, slots)
            return
        if self.backend == "FLASH_ATTN":  # the CUDA op FlashAttention's impl writes with
            from vllm.v1.attention.backends.fa_utils import reshape_and_cache_flash as write
        else:
            from vllm.v1.attention.ops.triton_reshape_and_cache_flash import triton_reshape_and_cache_flash as write
        one = torch.ones((), dtype=torch.float32, device=view.device)
        write(key, value, *_split(view, self.spec.head_size), slots, "auto", one, one)

    def read(self, view: torch.Tensor, block: int, query: torch.Tensor) -> torch.Tensor:
        return _READERS[self.backend](self, view, block, query)


def _split(view: torch.Tensor, head_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, H, N, 2*hs) as the Triton and FlashAttention backends split it: key and value caches (B, N, H, hs)."""
    key, value = view.transpose(1, 2).split(head_size, dim=-1)
    return key, value


def _one_request(query: torch.Tensor, block: int) -> dict:
    device, tokens = query.device, query.shape[0]
    return {"cu_seqlens_q": torch.tensor([0, tokens], dtype=torch.int32, device=device),
            "seqused_k": torch.tensor([tokens], dtype=torch.int32, device=device),
            "block_table": torch.tensor([[block]], dtype=torch.int32, device=device)}


def _read_triton(kernels: AttentionKernels, view: torch.Tensor, block: int, query: torch.Tensor) -> torch.Tensor:
    from vllm.v1.attention.ops.triton_unified_attention import unified_attention

    window, tokens = kernels.window, query.shape[0]
    out = torch.empty_like(query)
    ones = torch.ones(1, kernels.spec.num_kv_heads, device=view.device)
    key, value = _split(view, kernels.spec.head_size)
    unified_attention(q=query, k=key, v=value, out=out, **_one_request(query, block), max_seqlen_q=tokens,
                      max_seqlen_k=tokens, softmax_scale=kernels.scale, causal=True,
                      window_size=(window - 1, 0) if window else (-1, -1), softcap=kernels.softcap,
                      q_descale=None, k_descale=ones, v_descale=ones)
    return out


def _read_flash(kernels: AttentionKernels, view: torch.Tensor, block: int, query: torch.Tensor) -> torch.Tensor:
    """FlashAttention's varlen kernel over the paged cache (GPU only; no run of ours has reached it yet)."""
    from vllm.v1.attention.backends.fa_utils import flash_attn_varlen_func

    window, tokens = kernels.window, query.shape[0]
    out = torch.empty_like(query)
    key, value = _split(view, kernels.spec.head_size)
    batch = _one_request(query, block)
    flash_attn_varlen_func(q=query, k=key, v=value, out=out, cu_seqlens_q=batch["cu_seqlens_q"], max_seqlen_q=tokens,
                           seqused_k=batch["seqused_k"], max_seqlen_k=tokens, softmax_scale=kernels.scale,
                           causal=True, window_size=[window - 1, 0] if window else None,
                           block_table=batch["block_table"], softcap=kernels.softcap,
                           fa_version=kernels.fa_version)
    return out


def _read_cpu(kernels: AttentionKernels, view: torch.Tensor, block: int, query: torch.Tensor) -> torch.Tensor:
    """CPU_ATTN's kernel, with the scheduler metadata its builder would make for this one request."""
    from vllm import _custom_ops as ops

    blocks, heads, tokens_per_block, _ = view.shape
    key, value = view.view(blocks, heads, tokens_per_block * 2, -1).chunk(2, dim=2)  # CPU_ATTN's own split
    tokens = query.shape[0]
    batch = _one_request(query, block)
    starts, lengths = batch["cu_seqlens_q"], batch["seqused_k"]
    window = kernels.window or -1
    metadata = ops.cpu_attn_get_scheduler_metadata(
        num_reqs=1, num_heads=kernels.num_heads, num_kv_heads=heads, head_dim=kernels.spec.head_size,
        seq_lens=lengths, dtype=query.dtype, query_start_loc=starts, causal=True, sliding_window_size=window,
        isa=kernels.isa, enable_kv_split=False)
    out = torch.empty_like(query)
    ops.cpu_attention_with_kv_cache(query=query[:tokens], key_cache=key, value_cache=value, output=out,
                                    query_start_loc=starts, seq_lens=lengths, scale=kernels.scale, causal=True,
                                    alibi_slopes=None, sliding_window=window, block_table=batch["block_table"],
                                    softcap=kernels.softcap, scheduler_metadata=metadata, s_aux=None)
    return out


_READERS = {"TRITON_ATTN": _read_triton, "FLASH_ATTN": _read_flash, "CPU_ATTN": _read_cpu}


def reference_attention(kernels: AttentionKernels, query: torch.Tensor, key: torch.Tensor,
                        value: torch.Tensor) -> torch.Tensor:
    """Causal (windowed) attention in float32 over the keys themselves: what any correct read must come close to."""
    tokens, heads = query.shape[0], query.shape[1]
    group = heads // key.shape[1]
    q = query.float().transpose(0, 1)
    k = key.float().repeat_interleave(group, dim=1).transpose(0, 1)
    v = value.float().repeat_interleave(group, dim=1).transpose(0, 1)
    scores = q @ k.transpose(1, 2) * kernels.scale
    if kernels.softcap:
        scores = kernels.softcap * torch.tanh(scores / kernels.softcap)
    position = torch.arange(tokens, device=query.device)
    distance = position[:, None] - position[None, :]
    visible = (distance >= 0) & (distance < (kernels.window or tokens + 1))
    scores = scores.masked_fill(~visible, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(0, 1)
