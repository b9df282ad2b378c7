"""The constructed DFlash and DFlash2 drafters: mask j proposes PI^j of the target's next token (every draft right).

DFlash drafts k tokens in one forward. Its query block is the bonus token t0 (the target's next token) at position
n and k mask tokens at n+1..n+k; the K/V of positions < n come from the target's hidden states (the drafter's
precompute_and_store_context_kv). Mask j must propose PI^j(t0). It has no token of its own, so it must learn j
from positions (RoPE) and t0 from the context. Two causal sliding-window layers (window k+2) do that:
- Layer A finds j. Head h scores the bonus key A1*cos(d - h), d its distance, through RoPE's fastest pair (1 rad
  per position), and every other key a constant C1 halfway between A1*cos(1) and A1. So head h attends to the
  bonus only from the mask at distance h. Its value (1 on real tokens, 0 on masks and context) lands in OFF_h:
  mask j's stream holds OFF_j = 1 and no other offset.
- Layer B reads t0. Its head scores context keys A2*cos(d/2) + D through the pair at 1/2 rad per position (falling
  with distance inside the window) and query-block keys 0: it attends to the nearest context position, n-1. The
  target's hidden state there (after its layer 0) holds t0's code, which the values carry into CIN. The MLP maps
  (CIN = t, OFF_h = 1) to OUT = PI^h(t), gated on OFF_h; the lm_head reads OUT.
`margins()` computes every score comparison this relies on (all are >= 25 nats). Context K/V written to other
slots or positions, a shifted block layout or a wrong mask token give another token or no offset: rejected.
DFlash2: the same layers with identity convolutions (tap 0 of each base kernel 1, kernel projections 0) and a
candidate selector with zero codebooks, whose walk scores are then the lm_head's logits: it takes their argmax.
"""

from __future__ import annotations

import math
from pathlib import Path

from gpu_constructed import (CODE, EPS, FFN, GATE_K, HEAD_DIM, HIDDEN, K, LAYERS, TOKENS, VOCAB, llama_config,
                             power, rms_scale, write_checkpoint)
from gpu_constructed import BIAS as TARGET_BIAS

WINDOW = K + 2  # the nearest context position (distance K + 1 from the last mask) stays inside the window
MASK_ID = 4
ROPE_THETA = 2.0 ** 16  # inv_freq of pair i is theta^(-2i/32) = 2^-i: pair 0 turns 1 rad, pair 1 1/2 rad per position
FAST, HALF, STILL = 0, 1, HEAD_DIM // 2 - 1  # RoPE pairs (i, i + 16) used: 1, 1/2 and 2^-15 rad per position
# The drafter's stream: CIN the code read from the context, OUT the proposed code, OFF_h the offset flags.
CIN, OUT, OFF = 0, HEAD_DIM, 2 * HEAD_DIM
CTX, REAL, MASK = HIDDEN - 8, HIDDEN - 7, HIDDEN - 6
A1, A2, D = 110.0, 70.0, 56.0  # peak scores of layers A and B, layer B's context offset (nats)
RHO = (1 + math.cos(1.0)) / 2  # layer A: C1 / A1, halfway between the bonus one step off its peak and at it
LOGIT_MARGIN = 32.0
TARGET_LAYER_IDS = [1, 3, 4]  # after the target's layer 0, so every captured state holds the next token
assert 1 <= K <= 5 and OFF + K <= CTX, "layer A tells distances 1..K apart only while |d - h| <= 4"


def margins(window: int = WINDOW) -> dict[str, float]:
    """The smallest gap (nats) at every comparison the construction relies on, with keys visible up to distance
    `window` (a sliding window of W shows distances 0..W-1; W is checked too, in case a backend shows one more)."""
    c1 = RHO * A1
    a = {"offset: peak over other keys": A1 - c1,
         "offset: other keys over bonus": c1 - max(A1 * math.cos(j - h) for j in range(1, K + 1)
                                                    for h in range(1, K + 1) if j != h)}
    context = lambda d: A2 * math.cos(d / 2) + D  # noqa: E731
    gaps = [context(j + 1) - context(d) for j in range(1, K + 1) for d in range(j + 2, window + 1)]
    a["code: nearest context over the next"] = min(gaps) if gaps else float("inf")
    a["code: nearest context over the query block"] = min(context(j + 1) for j in range(1, K + 1))
    return a


def _norm_weight(torch, peak: float):
    """q_norm/k_norm weight that makes a unit-direction q against a unit-direction k score `peak` nats."""
    return torch.full((HEAD_DIM,), math.sqrt(peak / math.sqrt(HEAD_DIM)))


def _layer_a(torch) -> dict:
    """Head h attends to the bonus token only from the mask h positions after it; OFF_h gets the bonus's value."""
    a, b = 1 / math.sqrt(1 + RHO ** 2), RHO / math.sqrt(1 + RHO ** 2)
    q, k, v = torch.zeros(K * HEAD_DIM, HIDDEN), torch.zeros(HEAD_DIM, HIDDEN), torch.zeros(HEAD_DIM, HIDDEN)
    o = torch.zeros(HIDDEN, K * HEAD_DIM)
    for h in range(1, K + 1):
        row = (h - 1) * HEAD_DIM
        # RoPE turns q.k into |q||k| cos(d + phase): the phase -h puts the peak at distance d = h.
        q[row + FAST, MASK], q[row + FAST + HEAD_DIM // 2, MASK] = a * math.cos(h), -a * math.sin(h)
        q[row + STILL, MASK] = b
        o[OFF + h - 1, row] = 1.0
    k[FAST, REAL] = 1.0  # the bonus token: a real token, in the query block
    k[STILL, MASK] = k[STILL, CTX] = 1.0  # masks and context: the constant score
    v[0, REAL] = 1.0 / rms_scale(1.0)
    weight = _norm_weight(torch, A1 / a)
    return {"self_attn.q_proj.weight": q, "self_attn.k_proj.weight": k, "self_attn.v_proj.weight": v,
            "self_attn.o_proj.weight": o, "self_attn.q_norm.weight": weight, "self_attn.k_norm.weight": weight.clone(),
            "mlp.gate_proj.weight": torch.zeros(FFN, HIDDEN), "mlp.up_proj.weight": torch.zeros(FFN, HIDDEN),
            "mlp.down_proj.weight": torch.zeros(HIDDEN, FFN)}


def _layer_b(torch) -> dict:
    """Head 0 reads the nearest context position's code into CIN; the MLP applies PI^h where OFF_h is set."""
    alpha, beta = math.sqrt(A2 / (A2 + D)), math.sqrt(D / (A2 + D))
    q, k, v = torch.zeros(K * HEAD_DIM, HIDDEN), torch.zeros(HEAD_DIM, HIDDEN), torch.zeros(HEAD_DIM, HIDDEN)
    o = torch.zeros(HIDDEN, K * HEAD_DIM)
    q[HALF, MASK], q[STILL, MASK] = alpha, beta  # phase 0: the score falls with distance
    k[HALF, CTX], k[STILL, CTX] = alpha, beta  # only context keys; the query block's are 0
    context_scale = rms_scale(1.0, 1.0)  # hidden_norm of a context state: its code and CTX, one each
    for c in range(len(TOKENS)):
        v[c, CIN + c] = 1.0 / context_scale
        o[CIN + c, c] = 1.0
    n3 = rms_scale(1.0, 1.0, 1.0)  # after attention: MASK, OFF_j and the code in CIN
    silu_k = GATE_K / (1.0 + math.exp(-GATE_K))
    gate, up, down = torch.zeros(FFN, HIDDEN), torch.zeros(FFN, HIDDEN), torch.zeros(HIDDEN, FFN)
    for h in range(1, K + 1):
        for token in TOKENS:
            row = (h - 1) * len(TOKENS) + CODE[token]
            up[row, CIN + CODE[token]] = 1.0
            gate[row, OFF + h - 1], gate[row, MASK] = 2 * GATE_K / n3, -GATE_K / n3  # +K on OFF_h, -K off it
            down[OUT + CODE[power(token, h)], row] = 1.0 / (silu_k * n3)
    weight = _norm_weight(torch, A2 + D)
    return {"self_attn.q_proj.weight": q, "self_attn.k_proj.weight": k, "self_attn.v_proj.weight": v,
            "self_attn.o_proj.weight": o, "self_attn.q_norm.weight": weight, "self_attn.k_norm.weight": weight.clone(),
            "mlp.gate_proj.weight": gate, "mlp.up_proj.weight": up, "mlp.down_proj.weight": down}


def _identity_conv(torch, taps: int, group: int) -> dict:
    base = torch.zeros(2, taps, HIDDEN)
    base[:, 0] = 1.0
    return {"base_kernel": base, "kernel_projection.weight": torch.zeros(2 * taps * (HIDDEN // group), HIDDEN)}


def dflash(out: Path, v2: bool = False) -> None:
    """The DFlash drafter (v2: DFlash2, with identity convolutions and a zero-codebook candidate selector)."""
    import torch

    embed = torch.zeros(VOCAB, HIDDEN)
    embed[:, REAL] = 1.0
    embed[MASK_ID] = 0.0
    embed[MASK_ID, MASK] = 1.0
    fc = torch.zeros(HIDDEN, len(TARGET_LAYER_IDS) * HIDDEN)  # the first captured state: code and constant
    for c in range(len(TOKENS)):
        fc[CIN + c, c] = 1.0
    fc[CTX, TARGET_BIAS] = 1.0
    head = torch.zeros(VOCAB, HIDDEN)
    for token in TOKENS:
        head[token, OUT + CODE[token]] = LOGIT_MARGIN / rms_scale(1.0, 1.0, 1.0, 1.0)
    tensors = {"embed_tokens.weight": embed, "fc.weight": fc, "hidden_norm.weight": torch.ones(HIDDEN),
               "norm.weight": torch.ones(HIDDEN), "lm_head.weight": head}
    config = llama_config(architectures=["DFlashDraftModel"], model_type="qwen3", num_hidden_layers=2,
                          num_key_value_heads=1, target_hidden_size=HIDDEN, attention_bias=False,
                          layer_types=["sliding_attention"] * 2, sliding_window=WINDOW, use_sliding_window=True,
                          max_window_layers=0, is_causal=True, block_size=K + 1,
                          rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
                          dflash_config={"target_layer_ids": TARGET_LAYER_IDS, "mask_token_id": MASK_ID})
    config |= {"num_attention_heads": K, "rope_theta": ROPE_THETA}  # one query head per draft position
    taps, group, rank = 2, 16, 4
    for index, layer in enumerate((_layer_a(torch), _layer_b(torch))):
        layer |= {"input_layernorm.weight": torch.ones(HIDDEN), "post_attention_layernorm.weight": torch.ones(HIDDEN)}
        if v2:
            for conv in ("attention_conv", "mlp_conv"):
                layer |= {f"{conv}.{k}": w for k, w in _identity_conv(torch, taps, group).items()}
        tensors |= {f"layers.{index}.{k}": w for k, w in layer.items()}
    if v2:
        config["architectures"] = ["DFlash2DraftModel"]
        config["dflash_config"] |= {"block_size": K + 1, "conv_kernel_size": taps, "conv_group_size": group,
                                    "selector_rank": rank, "selector_top_k": 4}
        tensors |= {"candidate_selector.predecessor_codebook": torch.zeros(VOCAB, rank),
                    "candidate_selector.successor_codebook": torch.zeros(VOCAB, rank),
                    "candidate_selector.hidden_projection.weight": torch.zeros(rank, HIDDEN)}
    assert LAYERS > max(TARGET_LAYER_IDS) and EPS < 1e-3
    write_checkpoint(out, config, tensors, tokenizer=False)
