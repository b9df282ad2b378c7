"""Kimi-K3's RecoverSSM kernels on GLM-5.3-Flash's KDA gate, against GLM's own stored-states kernel, under Triton's
interpreter: `CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1 kda_recoverssm_glm.py REQUESTS WINDOW HEADS HEAD_DIM`.

Both paths are vLLM 0.34.0's. The stored-states path (GLM's `fused_recurrent_kda` as its spec-decode branch calls
it: bounded gate computed in the kernel, sigmoid beta, q/k l2-normalised in the kernel) writes the state after every
draft position to its own block. RecoverSSM (`kda_recoverssm_verify`, then `KDARecoverSSMCommitContext.commit`)
keeps the committed state, records each position's correction, key and gate, and folds the accepted ones in after
sampling. Request b accepts (b mod WINDOW) + 1 positions. Prints JSON: per state dtype, the largest differences of
the verify outputs and of each request's committed state, their scales, and the same commit with one position
fewer folded in (a planted off-by-one). The short convolution: after the window, GLM's path reads its conv history
at the accepted offset (`causal_conv1d_update` with num_accepted_tokens), RecoverSSM's commit moves the history to
the front and the next step reads it there; the next window's convolution outputs of both are compared.
"""

from __future__ import annotations

import json
import sys
import types

import torch

import vllm.models.glm5next.nvidia.ops.third_party.kda.fused_recurrent as glm_recurrent
from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first
from vllm.model_executor.layers.mamba.ops.causal_conv1d import causal_conv1d_update
from vllm.models.glm5next.nvidia.ops.third_party.kda import fused_recurrent_kda
from vllm.models.kimi_k3.nvidia.ops.recoverssm import (KDARecoverSSMCommitContext, KDARecoverSSMRecords,
                                                       kda_recoverssm_verify)
from vllm.triton_utils import tl

# GLM's kernel calls flash-linear-attention's module-level alias of tl.exp, bound before the interpreter patches
# tl; the same function reached through tl runs there.
glm_recurrent.exp = lambda x: tl.exp(x)

LOWER_BOUND = -5.0  # GLM-5.3-Flash's linear_attn_config.gate_lower_bound
# Align mode: the Mamba block size (at least one window) and the state blocks in each request's block table.
ALIGN_BLOCK, COLUMNS = 8, 4
ACTIVATIONS = torch.bfloat16
CONV_WIDTH = 4  # linear_attn_config.short_conv_kernel_size


def _conv_view(conv: torch.Tensor) -> torch.Tensor:
    """(blocks, dim, state_len), the view causal_conv1d_update takes, whatever the layout vLLM stores."""
    return conv if is_conv_state_dim_first() else conv.transpose(-1, -2)


def _conv_step(x: torch.Tensor, conv: torch.Tensor, weight: torch.Tensor, slots: torch.Tensor, accepted: torch.Tensor,
               query_start: torch.Tensor, window: int) -> torch.Tensor:
    """One window of the short convolution, as both paths call it (silu, q|k|v packed)."""
    return causal_conv1d_update(x, _conv_view(conv), weight, None, activation="silu", conv_state_indices=slots,
                                num_accepted_tokens=accepted, query_start_loc=query_start, max_query_len=window,
                                out=torch.empty_like(x))


def _inputs(requests: int, window: int, heads: int, dim: int) -> dict:
    tokens = requests * window
    shape = (1, tokens, heads, dim)
    return {"q": torch.randn(shape, dtype=ACTIVATIONS), "k": torch.randn(shape, dtype=ACTIVATIONS),
            "v": torch.randn(shape, dtype=ACTIVATIONS), "g": torch.randn(shape, dtype=ACTIVATIONS),
            "beta": torch.randn(1, tokens, heads, dtype=ACTIVATIONS),
            "a_log": torch.rand(1, 1, heads, 1) * 2 - 1,  # GLM's parameter shape
            "dt_bias": torch.randn(heads * dim) * 0.5,
            "start": torch.randn(requests, heads, dim, dim) * 0.3,
            "query_start": torch.arange(0, tokens + 1, window, dtype=torch.int32)}


def _stored_states(x: dict, window: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """GLM's path: (outputs, states by block), block 1 + b * window + t holding request b's state after position t."""
    requests = x["start"].shape[0]
    blocks = torch.zeros(1 + requests * window, *x["start"].shape[1:], dtype=dtype)  # block 0 is the null block
    blocks[1::window] = x["start"].to(dtype)
    indices = 1 + torch.arange(requests * window, dtype=torch.int32).reshape(requests, window)
    out, _ = fused_recurrent_kda(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], initial_state=blocks,
                                 use_qk_l2norm_in_kernel=True, cu_seqlens=x["query_start"], ssm_state_indices=indices,
                                 num_accepted_tokens=torch.ones(requests, dtype=torch.int32), sigmoid_beta=True,
                                 a_log=x["a_log"], g_bias=x["dt_bias"], compute_gate=True, lower_bound=LOWER_BOUND)
    return out, blocks


def _recover(x: dict, window: int, dtype: torch.dtype, accepted: torch.Tensor, planted: int, conv: torch.Tensor):
    """RecoverSSM's path: (verify outputs, [committed states, conv states] as committed, and with `planted` added to
    accepted); `conv` holds the window's conv states after the verify's convolution."""
    requests, heads, dim = x["start"].shape[:3]
    checkpoints = torch.zeros(1 + requests, heads, dim, dim, dtype=dtype)
    checkpoints[1:] = x["start"].to(dtype)
    slots = torch.arange(1, requests + 1, dtype=torch.int32)
    records = KDARecoverSSMRecords.allocate(requests, heads, window, dim, ACTIVATIONS, torch.device("cpu"))
    a_log = x["a_log"].reshape(heads).contiguous()  # Kimi's layout of the same parameter
    out = kda_recoverssm_verify(x["q"], x["k"], x["v"], x["g"], x["beta"], a_log, x["dt_bias"], LOWER_BOUND,
                                checkpoints, records, x["query_start"], slots, window)
    committed = []
    for shift in (0, planted):
        states, conv_states = checkpoints.clone(), conv.clone()
        layer = types.SimpleNamespace(kv_cache=(conv_states, states), recoverssm_records=records, A_log=a_log,
                                      dt_bias=x["dt_bias"], local_num_heads=heads, head_dim=dim,
                                      gate_lower_bound=LOWER_BOUND)
        context = KDARecoverSSMCommitContext.create([layer], spec_query_len=window, max_num_reqs=requests)
        context.commit((accepted + shift).to(torch.int32), slots, x["query_start"])
        committed.append((states[1:], conv_states))
    return out, committed[0], committed[1]


def _aligned(x: dict, window: int, dtype: torch.dtype, accepted: torch.Tensor, computed: torch.Tensor,
             block: int, planted: int) -> tuple[torch.Tensor, torch.Tensor]:
    """RecoverSSM's commit in prefix-caching align mode: each request's block table of COLUMNS state blocks, its
    committed state in column (computed - 1) // block; returns (state blocks as committed, block table)."""
    requests, heads, dim = x["start"].shape[:3]
    table = 1 + torch.arange(requests * COLUMNS, dtype=torch.int32).reshape(requests, COLUMNS)
    slots = table[torch.arange(requests), ((computed - 1) // block).long()].contiguous()
    states = torch.zeros(1 + requests * COLUMNS, heads, dim, dim, dtype=dtype)
    states[slots.long()] = x["start"].to(dtype)
    records = KDARecoverSSMRecords.allocate(requests, heads, window, dim, ACTIVATIONS, torch.device("cpu"))
    a_log = x["a_log"].reshape(heads).contiguous()
    kda_recoverssm_verify(x["q"], x["k"], x["v"], x["g"], x["beta"], a_log, x["dt_bias"], LOWER_BOUND, states,
                          records, x["query_start"], slots, window)
    # The commit moves conv histories too; they are compared above, outside align mode, and not here.
    conv = _conv_history(requests * COLUMNS, window, 3 * heads * dim, random=False)
    layer = types.SimpleNamespace(kv_cache=(conv, states), recoverssm_records=records, A_log=a_log,
                                  dt_bias=x["dt_bias"], local_num_heads=heads, head_dim=dim,
                                  gate_lower_bound=LOWER_BOUND)
    context = KDARecoverSSMCommitContext.create([layer], spec_query_len=window, max_num_reqs=requests)
    context.commit((accepted + planted).to(torch.int32), slots, x["query_start"], block_table=table,
                   num_computed_tokens=computed.to(torch.int32), mamba_block_size=block)
    return states, table


def _aligned_expected(x: dict, blocks: torch.Tensor, window: int, dtype: torch.dtype, accepted: torch.Tensor,
                      computed: torch.Tensor, block: int, table: torch.Tensor) -> tuple[torch.Tensor, int]:
    """vLLM's align-mode contract on GLM's stored states: a block that the window completes holds the state after
    its last token, the block of the last committed token holds the final state, every other block is as it was;
    (the expected state blocks, how many requests completed a block)."""
    requests = x["start"].shape[0]
    expected = torch.zeros(1 + requests * COLUMNS, *x["start"].shape[1:], dtype=dtype)
    crossed = 0
    for b in range(requests):
        n, a = int(computed[b]), int(accepted[b])
        expected[table[b, (n - 1) // block]] = x["start"][b].to(dtype)  # the block the window read from
        after = lambda t: blocks[1 + b * window + t]  # noqa: E731  stored state after window position t
        boundary = (n // block + 1) * block
        if n + a >= boundary:
            crossed += 1
            expected[table[b, boundary // block - 1]] = after(boundary - n - 1)
        expected[table[b, (n + a - 1) // block]] = after(a - 1)
    return expected, crossed


def _conv_history(requests: int, window: int, conv_dim: int, random: bool) -> torch.Tensor:
    """Conv states in the layout vLLM stores them, each request's history of CONV_WIDTH - 1 inputs random or zero."""
    conv = torch.zeros(1 + requests, conv_dim, CONV_WIDTH - 1 + window - 1, dtype=ACTIVATIONS)
    conv = conv if is_conv_state_dim_first() else conv.transpose(-1, -2).contiguous()
    if random:
        _conv_view(conv)[1:, :, :CONV_WIDTH - 1] = torch.randn(requests, conv_dim, CONV_WIDTH - 1, dtype=ACTIVATIONS)
    return conv


def compare(requests: int, window: int, heads: int, dim: int, dtype: torch.dtype, with_conv: bool) -> dict:
    """Largest differences between the two paths, per request, with their scales; `with_conv`: also the next
    window's convolution (the conv state does not depend on the recurrent state's dtype)."""
    torch.manual_seed(0)
    x = _inputs(requests, window, heads, dim)
    accepted = torch.tensor([b % window + 1 for b in range(requests)], dtype=torch.int32)
    ones = torch.ones(requests, dtype=torch.int32)
    slots = torch.arange(1, requests + 1, dtype=torch.int32)
    # The window's convolution from a random history, then the next window's, both in GLM's packed q|k|v width.
    conv_dim, tokens = 3 * heads * dim, requests * window
    conv = _conv_history(requests, window, conv_dim, random=with_conv)
    if with_conv:
        weight = torch.randn(conv_dim, CONV_WIDTH, dtype=torch.float32) * 0.5
        window_x, next_x = (torch.randn(tokens, conv_dim, dtype=ACTIVATIONS) for _ in range(2))
        _conv_step(window_x, conv, weight, slots, ones, x["query_start"], window)

    stored_out, blocks = _stored_states(x, window, dtype)
    out, (committed, conv_committed), (off_by_one, conv_off_by_one) = _recover(x, window, dtype, accepted, -1, conv)
    expected = torch.stack([blocks[1 + b * window + int(accepted[b]) - 1] for b in range(requests)]).float()
    result = {"output_error": (out.float() - stored_out.float()).abs().max().item(),
              "output_scale": stored_out.float().abs().max().item(),
              "accepted": accepted.tolist(),
              "state_error": (committed.float() - expected).abs().amax(dim=(1, 2, 3)).tolist(),
              "state_scale": expected.abs().amax(dim=(1, 2, 3)).tolist(),
              "planted_state_error": (off_by_one.float() - expected).abs().amax(dim=(1, 2, 3)).tolist()}
    # Prefix-cache checkpoints (align mode): each request's window starts at another offset inside a block.
    computed = torch.tensor([ALIGN_BLOCK * 2 + (3 * b) % ALIGN_BLOCK for b in range(requests)], dtype=torch.int32)
    for name, planted in (("aligned", 0), ("aligned_planted", -1)):
        states, table = _aligned(x, window, dtype, accepted, computed, ALIGN_BLOCK, planted)
        want, crossed = _aligned_expected(x, blocks, window, dtype, accepted, computed, ALIGN_BLOCK, table)
        per_request = (states.float() - want.float()).abs()[1:].reshape(requests, COLUMNS, -1).amax(dim=(1, 2))
        result |= {f"{name}_state_error": per_request.tolist(), "aligned_crossings": crossed}
    if not with_conv:
        return result
    stored_next = _conv_step(next_x, conv.clone(), weight, slots, accepted, x["query_start"], window)

    def next_window_error(recovered_conv: torch.Tensor) -> list[float]:
        recovered = _conv_step(next_x, recovered_conv, weight, slots, ones, x["query_start"], window)
        return (recovered.float() - stored_next.float()).abs().reshape(requests, -1).amax(dim=1).tolist()

    return result | {"conv_error": next_window_error(conv_committed),
                     "conv_scale": stored_next.float().abs().max().item(),
                     "planted_conv_error": next_window_error(conv_off_by_one)}


if __name__ == "__main__":
    requests, window, heads, dim = map(int, sys.argv[1:5])
    print(json.dumps({str(dtype).removeprefix("torch."): compare(requests, window, heads, dim, dtype,
                                                                 with_conv=dtype == torch.float32)
                      for dtype in (torch.float32, torch.bfloat16)}))
