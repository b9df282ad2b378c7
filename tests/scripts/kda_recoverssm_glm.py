"""Kimi-K3's RecoverSSM kernels on GLM-5.3-Flash's KDA gate, against GLM's own stored-states kernel, under Triton's
interpreter: `CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1 kda_recoverssm_glm.py REQUESTS WINDOW HEADS HEAD_DIM`.

Both paths are vLLM 0.34.0's. The stored-states path (GLM's `fused_recurrent_kda` as its spec-decode branch calls
it: bounded gate computed in the kernel, sigmoid beta, q/k l2-normalised in the kernel) writes the state after every
draft position to its own block. RecoverSSM (`kda_recoverssm_verify`, then `KDARecoverSSMCommitContext.commit`)
keeps the committed state, records each position's correction, key and gate, and folds the accepted ones in after
sampling. The comparison without prefix caching is the one the fork's start-up check runs on a GPU
(`vllm._fork.recoverssm_check.compare`: outputs, committed states, the next window's convolution), here on the CPU,
also with the commit one token short (a planted off-by-one). With prefix caching (the commit's align mode) every state
block of each request's block table is compared with vLLM's align contract on GLM's stored states. Prints JSON per
state dtype.
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from dataclasses import asdict

import torch
import vllm.models.glm5next.nvidia.ops.third_party.kda.fused_recurrent as glm_recurrent
from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first
from vllm.models.glm5next.nvidia.ops.third_party.kda import fused_recurrent_kda
from vllm.models.kimi_k3.nvidia.ops.recoverssm import (
    KDARecoverSSMCommitContext,
    KDARecoverSSMRecords,
    kda_recoverssm_verify,
)
from vllm.triton_utils import tl
from vllm.utils.torch_utils import set_default_torch_dtype

from vllm._fork.recoverssm_check import CONV_WIDTH, compare

# GLM's kernel calls flash-linear-attention's module-level alias of tl.exp, bound before the interpreter patches
# tl; the same function reached through tl runs there.
glm_recurrent.exp = lambda x: tl.exp(x)

LOWER_BOUND = -5.0  # GLM-5.3-Flash's linear_attn_config.gate_lower_bound
# Align mode: the Mamba block size (at least one window) and the state blocks in each request's block table.
ALIGN_BLOCK, COLUMNS = 8, 4
ACTIVATIONS = torch.bfloat16


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
    # The commit moves conv histories too; compare() checks them outside align mode, not here.
    conv = _conv_states(requests * COLUMNS, window, 3 * heads * dim)
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
        row = 1 + b * window  # stored state after window position t: blocks[row + t]
        boundary = (n // block + 1) * block
        if n + a >= boundary:
            crossed += 1
            expected[table[b, boundary // block - 1]] = blocks[row + boundary - n - 1]
        expected[table[b, (n + a - 1) // block]] = blocks[row + a - 1]
    return expected, crossed


def _conv_states(blocks: int, window: int, conv_dim: int) -> torch.Tensor:
    """Zero conv states in the layout vLLM stores them (the align-mode commit moves them; they are not compared)."""
    conv = torch.zeros(1 + blocks, conv_dim, CONV_WIDTH - 1 + window - 1, dtype=ACTIVATIONS)
    return conv if is_conv_state_dim_first() else conv.transpose(-1, -2).contiguous()


def aligned(requests: int, window: int, heads: int, dim: int, dtype: torch.dtype) -> dict:
    """Prefix-cache checkpoints (align mode): each request's window starts at another offset inside a block; per
    request, the largest difference over its state blocks, as committed and with one token too few folded in."""
    torch.manual_seed(0)
    x = _inputs(requests, window, heads, dim)
    accepted = torch.tensor([b % window + 1 for b in range(requests)], dtype=torch.int32)
    _, blocks = _stored_states(x, window, dtype)
    computed = torch.tensor([ALIGN_BLOCK * 2 + (3 * b) % ALIGN_BLOCK for b in range(requests)], dtype=torch.int32)
    result = {"accepted": accepted.tolist()}
    for name, planted in (("aligned", 0), ("aligned_planted", -1)):
        states, table = _aligned(x, window, dtype, accepted, computed, ALIGN_BLOCK, planted)
        want, crossed = _aligned_expected(x, blocks, window, dtype, accepted, computed, ALIGN_BLOCK, table)
        per_request = (states.float() - want.float()).abs()[1:].reshape(requests, COLUMNS, -1).amax(dim=(1, 2))
        result |= {f"{name}_state_error": per_request.tolist(), "aligned_crossings": crossed,
                   "state_scale": want.float().abs()[1:].reshape(requests, COLUMNS, -1).amax(dim=(1, 2)).tolist()}
    return result


def _as_in_model_construction():
    """The defaults a model's construction sets, where the start-up check runs: a device other than the tensors'
    (the GPU there; meta here, so a tensor made without its device fails) and bf16 as the default dtype."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch.device("meta"))
    stack.enter_context(set_default_torch_dtype(torch.bfloat16))
    return stack


if __name__ == "__main__":
    requests, window, heads, dim = map(int, sys.argv[1:5])
    cpu = torch.device("cpu")
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        with _as_in_model_construction():
            comparison = compare(cpu, heads, dim, window, LOWER_BOUND, dtype)
        results[str(dtype).removeprefix("torch.")] = {"comparison": asdict(comparison),
                                                      **aligned(requests, window, heads, dim, dtype)}
    # The commit's arithmetic does not depend on the state dtype; one planted run is enough (each costs a minute).
    results["float32"]["planted"] = asdict(compare(cpu, heads, dim, window, LOWER_BOUND, torch.float32, short=1))
    print(json.dumps(results))
