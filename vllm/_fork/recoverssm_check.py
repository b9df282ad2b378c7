"""GLM-5.3-Flash's RecoverSSM (`--use-replayssm`) proves itself on the user's GPU before the engine uses it.

No GPU has run RecoverSSM on GLM-5.3-Flash's KDA layers yet; the CPU proves it under Triton's interpreter only. So
when a GLM KDA layer is built with RecoverSSM on a CUDA device, the first one of each shape in the process runs both
speculative paths on that device with random inputs at the layer's shapes, dtypes and gate bound: GLM's own
stored-states kernel (`fused_recurrent_kda`, a state per draft position) and RecoverSSM (Kimi-K3's verify, then its
commit of the accepted tokens). Request b of a window accepts b % window + 1 tokens, so every count is compared.
The verify outputs, each request's committed state and the next window's short convolution (read at the accepted
offset by the stored path, from the front after the commit's compaction) must agree within the tolerances below;
otherwise the layer refuses to build, in one line that names what differed and says to drop `--use-replayssm`.
Other devices are not checked here: `meta` is spec-check's planning build, and the CPU tests call `compare` itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

CONV_WIDTH = 4  # GLM-5.3-Flash's short convolution
# Outputs are activations (bf16): two steps of bf16 at their largest magnitude. States: fp32 paths add the same
# terms in another order (1e-4, loose for a GPU's fused arithmetic); bf16 states round once more on one side. A
# commit one token short misses by 0.3-1.3 at states of about 1 (tests/test_recoverssm_check.py).
OUTPUT_TOLERANCE = 2**-6
STATE_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2**-7}
_PASSED: set[tuple] = set()


class RecoverSSMCheckFailed(RuntimeError):
    """RecoverSSM and GLM's stored states disagree on this device."""


@dataclass(frozen=True)
class Comparison:
    """Largest differences between the two paths, each over the largest magnitude it is measured against (at
    least 1)."""

    output: float
    state: float
    conv: float

    def failure(self, state_dtype: torch.dtype) -> str | None:
        """What differs beyond tolerance, or None."""
        limits = {"verify outputs": (self.output, OUTPUT_TOLERANCE), "committed states": (self.state,
                  STATE_TOLERANCE[state_dtype]), "next window's convolution": (self.conv, OUTPUT_TOLERANCE)}
        wrong = [f"{name} by {value:.3g} (tolerance {limit:.3g})" for name, (value, limit) in limits.items()
                 if not value <= limit]
        return "; ".join(wrong) or None


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp(min=1.0)).item()


def _conv_window(x, conv, weight, slots, accepted, query_start, window) -> torch.Tensor:
    """One window of GLM's short convolution over packed q|k|v, in whichever layout vLLM stores conv states."""
    from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first
    from vllm.model_executor.layers.mamba.ops.causal_conv1d import causal_conv1d_update

    view = conv if is_conv_state_dim_first() else conv.transpose(-1, -2)
    return causal_conv1d_update(x, view, weight, None, activation="silu", conv_state_indices=slots,
                                num_accepted_tokens=accepted, query_start_loc=query_start, max_query_len=window,
                                out=torch.empty_like(x))


def compare(device: torch.device, heads: int, head_dim: int, window: int, lower_bound: float,
            state_dtype: torch.dtype, activation_dtype: torch.dtype = torch.bfloat16, short: int = 0) -> Comparison:
    """Both speculative paths on `device` for `window` requests; `short`: the commit folds in that many tokens fewer
    than were accepted (a planted fault)."""
    from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first
    from vllm.models.glm5next.common.kda import fused_recurrent_kda
    from vllm.models.kimi_k3.nvidia.ops.recoverssm import (
        KDARecoverSSMCommitContext,
        KDARecoverSSMRecords,
        kda_recoverssm_verify,
    )

    requests, tokens = window, window * window
    gen = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape: int, scale: float = 1.0, dtype: torch.dtype = activation_dtype) -> torch.Tensor:
        # Drawn on the CPU in fp32 whatever default device and dtype the model's construction has set.
        drawn = torch.randn(shape, generator=gen, device="cpu", dtype=torch.float32)
        return (drawn * scale).to(device=device, dtype=dtype)

    q, k, v, gate = (rand(1, tokens, heads, head_dim) for _ in range(4))
    beta = rand(1, tokens, heads)
    a_log, dt_bias = rand(heads, scale=0.5, dtype=torch.float32), rand(heads * head_dim, scale=0.5,
                                                                       dtype=torch.float32)
    start = rand(requests, heads, head_dim, head_dim, scale=0.3, dtype=state_dtype)
    query_start = torch.arange(0, tokens + 1, window, dtype=torch.int32, device=device)
    accepted = torch.arange(requests, dtype=torch.int32, device=device) % window + 1
    ones = torch.ones_like(accepted)

    # GLM's path: request b's state after window token t in block 1 + b * window + t (block 0 is the null block).
    stored = torch.zeros(1 + tokens, heads, head_dim, head_dim, dtype=state_dtype, device=device)
    stored[1::window] = start
    stored_slots = 1 + torch.arange(tokens, dtype=torch.int32, device=device).view(requests, window)
    stored_out, _ = fused_recurrent_kda(q=q, k=k, v=v, g=gate, beta=beta, initial_state=stored,
                                        use_qk_l2norm_in_kernel=True, cu_seqlens=query_start,
                                        ssm_state_indices=stored_slots, num_accepted_tokens=ones, sigmoid_beta=True,
                                        a_log=a_log.view(1, 1, heads, 1), g_bias=dt_bias, compute_gate=True,
                                        lower_bound=lower_bound)
    final = stored[stored_slots[torch.arange(requests, device=device), (accepted - 1).long()].long()]

    # RecoverSSM: one slot per request, the verify, then the commit of the accepted tokens.
    slots = 1 + torch.arange(requests, dtype=torch.int32, device=device)
    states = torch.zeros(1 + requests, heads, head_dim, head_dim, dtype=state_dtype, device=device)
    states[1:] = start
    records = KDARecoverSSMRecords.allocate(requests, heads, window, head_dim, activation_dtype, device)
    out = kda_recoverssm_verify(q, k, v, gate, beta, a_log, dt_bias, lower_bound, states, records, query_start,
                                slots, window)

    # The short convolution over the window from a random history; the stored path then reads it at the accepted
    # offset, RecoverSSM's commit moves it to the front.
    conv_dim = 3 * heads * head_dim
    conv = torch.zeros(1 + requests, conv_dim, CONV_WIDTH + window - 2, dtype=activation_dtype, device=device)
    conv[1:, :, :CONV_WIDTH - 1] = rand(requests, conv_dim, CONV_WIDTH - 1)
    conv = conv if is_conv_state_dim_first() else conv.transpose(-1, -2).contiguous()
    weight = rand(conv_dim, CONV_WIDTH, scale=0.5, dtype=torch.float32)
    this_window, next_window = rand(tokens, conv_dim), rand(tokens, conv_dim)
    _conv_window(this_window, conv, weight, slots, ones, query_start, window)
    stored_next = _conv_window(next_window, conv.clone(), weight, slots, accepted, query_start, window)

    layer = _CommitLayer(kv_cache=(conv, states), recoverssm_records=records, A_log=a_log, dt_bias=dt_bias,
                         local_num_heads=heads, head_dim=head_dim, gate_lower_bound=lower_bound)
    context = KDARecoverSSMCommitContext.create([layer], spec_query_len=window, max_num_reqs=requests)
    context.commit(accepted - short, slots, query_start)
    recovered_next = _conv_window(next_window, conv, weight, slots, ones, query_start, window)
    return Comparison(output=_relative(out, stored_out), state=_relative(states[1:], final),
                      conv=_relative(recovered_next, stored_next))


@dataclass
class _CommitLayer:
    """The attributes of a KDA layer that Kimi-K3's commit context reads."""

    kv_cache: tuple[torch.Tensor, torch.Tensor]
    recoverssm_records: Any
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    local_num_heads: int
    head_dim: int
    gate_lower_bound: float


def check_layer(layer: Any) -> None:
    """Refuse to build a GLM KDA layer whose RecoverSSM disagrees with its stored states on this CUDA device; each
    shape is checked once per process."""
    device = layer.conv1d.weight.device
    if not layer.use_recoverssm or device.type != "cuda":
        return
    state_dtype, activations = layer.get_state_dtype()[1], layer.model_config.dtype
    shape = (str(device), layer.local_num_heads, layer.head_dim, layer.num_spec + 1, layer.kda_lower_bound,
             state_dtype, activations)
    if shape in _PASSED:
        return
    from vllm.logger import init_logger

    began = time.perf_counter()
    found = compare(device, *shape[1:5], state_dtype, activations).failure(state_dtype)
    if found:
        raise RecoverSSMCheckFailed(
            f"--use-replayssm: RecoverSSM on {device} disagrees with GLM-5.3-Flash's stored speculative states "
            f"({shape[1]} heads of {shape[2]}, window {shape[3]}, {state_dtype} states): {found}. "
            "Serve without --use-replayssm and report this line to the fork.")
    _PASSED.add(shape)
    init_logger(__name__).info("RecoverSSM matched GLM-5.3-Flash's stored states on %s (%d heads, window %d, %s "
                               "states) in %.2f s.", device, shape[1], shape[3], state_dtype,
                               time.perf_counter() - began)
