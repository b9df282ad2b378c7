"""A plain torch forward of the constructed checkpoints, no vLLM: the target's streams and what a drafter proposes.

For what the CPU engine cannot run (DFlash2: Model Runner V1 refuses candidate-head drafts) and for the blind EAGLE3
drafter, whose failure needs no engine. Pre-norm residual blocks as vLLM's Llama/Qwen3/DFlash layers compute them:
RMSNorm, neox RoPE on per-head normed q and k, causal sliding-window attention with grouped KV heads, SiLU MLP,
DFlash2's grouped convolutions and its candidate walk. tests/test_gpu_constructed.py checks it against the CPU engine
on DFlash, where both run.
"""

from __future__ import annotations

import json
from pathlib import Path

EPS = 1e-6


def load(folder: Path) -> tuple[dict, dict]:
    from safetensors.torch import load_file

    return json.loads((Path(folder) / "config.json").read_text()), load_file(str(Path(folder) / "model.safetensors"))


def rms(x, weight):
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def rope(x, positions, theta: float):
    """Neox rotation of [tokens, heads, head_dim]: pair (i, i + d/2) turns by position * theta^(-2i/d)."""
    import torch

    half = x.shape[-1] // 2
    angle = positions[:, None].double() * theta ** (-torch.arange(half).double() / half)
    cos, sin = angle.cos()[:, None].float(), angle.sin()[:, None].float()
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


def attend(q, k, v, q_pos, k_pos, window: int | None):
    """Causal (and windowed) attention; q [n, heads, d], k/v [m, kv_heads, d]."""
    import torch

    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.einsum("nhd,mhd->hnm", q, k) / q.shape[-1] ** 0.5
    distance = q_pos[:, None] - k_pos[None, :]
    visible = (distance >= 0) & ((distance < window) if window else True)
    weights = scores.masked_fill(~visible, float("-inf")).softmax(-1)
    return torch.einsum("hnm,mhd->nhd", weights, v).flatten(1)


def _proj(w: dict, name: str, x):
    out = x @ w[f"{name}.weight"].T
    return out + w[f"{name}.bias"] if f"{name}.bias" in w else out


def _heads(x, head_dim: int):
    return x.unflatten(-1, (-1, head_dim))


def _qkv(w: dict, p: str, x, config: dict):
    d = config["head_dim"]
    q, k, v = (_heads(_proj(w, f"{p}self_attn.{n}_proj", x), d) for n in "qkv")
    if f"{p}self_attn.q_norm.weight" in w:
        q, k = rms(q, w[f"{p}self_attn.q_norm.weight"]), rms(k, w[f"{p}self_attn.k_norm.weight"])
    return q, k, v


def _theta(config: dict) -> float:
    return (config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta", 10000.0))


def _conv(w: dict, name: str, x, block: int, side: int, delta):
    """DFlash2's grouped convolution inside each query block: y[r] = sum_t (base[t] + delta[r, t, group]) x[r - t]."""
    import torch

    base = w[f"{name}.base_kernel"][side]  # [taps, hidden]
    taps, hidden = base.shape
    group = hidden // delta.shape[-1]
    out = torch.zeros_like(x)
    for tap in range(taps):
        coefficient = base[tap] + delta[:, tap].repeat_interleave(group, dim=-1)
        shifted = torch.cat([x.new_zeros(tap, hidden), x[:len(x) - tap]]) if tap else x
        inside = (torch.arange(len(x)) % block >= tap)[:, None]
        out += coefficient * shifted * inside
    return out


def _conv_in(w: dict, name: str, x, block: int):
    taps = w[f"{name}.base_kernel"].shape[1]
    coefficients = _proj(w, f"{name}.kernel_projection", x).unflatten(-1, (2, taps, -1))
    return _conv(w, name, x, block, 0, coefficients[:, 0]), coefficients[:, 1]


def decoder_layer(w: dict, p: str, x, positions, config: dict, context=None, block: int | None = None):
    """One pre-norm residual layer over a sequence; context: (k, v, positions) in front (DFlash's target states)."""
    import torch

    h = rms(x, w[f"{p}input_layernorm.weight"])
    conv = f"{p}attention_conv.base_kernel" in w
    if conv:
        h, later = _conv_in(w, f"{p}attention_conv", h, block)
    q, k, v = _qkv(w, p, h, config)
    theta, k_pos = _theta(config), positions
    q, k = rope(q, positions, theta), rope(k, positions, theta)
    if context is not None:
        k, v, k_pos = torch.cat([context[0], k]), torch.cat([context[1], v]), torch.cat([context[2], positions])
    attn = _proj(w, f"{p}self_attn.o_proj", attend(q, k, v, positions, k_pos, config.get("sliding_window")))
    if conv:
        attn = _conv(w, f"{p}attention_conv", attn, block, 1, later)
    x = x + attn
    h = rms(x, w[f"{p}post_attention_layernorm.weight"])
    if conv:
        h, later = _conv_in(w, f"{p}mlp_conv", h, block)
    mlp = _proj(w, f"{p}mlp.down_proj", torch.nn.functional.silu(_proj(w, f"{p}mlp.gate_proj", h))
                * _proj(w, f"{p}mlp.up_proj", h))
    return x + (_conv(w, f"{p}mlp_conv", mlp, block, 1, later) if conv else mlp)


def target_streams(folder: Path, tokens: list[int]) -> list:
    """The target's residual stream after each layer (index 0: the embeddings), over the whole prompt."""
    import torch

    config, w = load(folder)
    positions = torch.arange(len(tokens))
    streams = [w["model.embed_tokens.weight"][tokens]]
    for layer in range(config["num_hidden_layers"]):
        streams.append(decoder_layer(w, f"model.layers.{layer}.", streams[-1], positions, config))
    return streams


def logits(w: dict, head: str, stream):
    return rms(stream, w["norm.weight"] if "norm.weight" in w else w["model.norm.weight"]) @ w[head].T


def eagle3_first_draft(folder: Path, streams: list, tokens: list[int], next_token: int, aux: int) -> int:
    """EAGLE3's first proposal after the prompt: its midlayer over (token i+1, the target's aux state at i)."""
    import torch

    config, w = load(folder)
    shifted = tokens[1:] + [next_token]
    p, positions = "midlayer.", torch.arange(len(tokens))
    hidden = streams[aux] @ w["fc.weight"][:, :streams[aux].shape[-1]].T  # fc copies the first aux state
    embeds = rms(w["embed_tokens.weight"][shifted], w[f"{p}input_layernorm.weight"])
    h = torch.cat([embeds, rms(hidden, w[f"{p}hidden_norm.weight"])], dim=-1)
    q, k, v = _qkv(w, p, h, config)
    q, k = rope(q, positions, _theta(config)), rope(k, positions, _theta(config))
    x = hidden + _proj(w, f"{p}self_attn.o_proj", attend(q, k, v, positions, positions, config.get("sliding_window")))
    m = rms(x, w[f"{p}post_attention_layernorm.weight"])
    x = x + _proj(w, f"{p}mlp.down_proj", torch.nn.functional.silu(_proj(w, f"{p}mlp.gate_proj", m))
                  * _proj(w, f"{p}mlp.up_proj", m))
    return int(logits(w, "lm_head.weight", x[-1]).argmax())


def dflash_drafts(folder: Path, streams: list, next_token: int, k: int) -> list[int]:
    """DFlash/DFlash2's k proposals after the prompt: context K/V from the target's states, [bonus, mask x k]."""
    import torch

    config, w = load(folder)
    dflash = config["dflash_config"]
    n, block = len(streams[0]), k + 1
    aux = torch.cat([streams[i + 1] for i in dflash["target_layer_ids"]], dim=-1)  # each layer's output
    context = rms(aux @ w["fc.weight"].T, w["hidden_norm.weight"])
    ctx_pos, positions = torch.arange(n), torch.arange(n, n + block)
    x = w["embed_tokens.weight"][[next_token] + [dflash["mask_token_id"]] * k]
    for layer in range(config["num_hidden_layers"]):
        p = f"layers.{layer}."
        _, ck, cv = _qkv(w, p, context, config)
        ctx = (rope(ck, ctx_pos, _theta(config)), cv, ctx_pos)
        x = decoder_layer(w, p, x, positions, config, context=ctx, block=block)
    scores = logits(w, "lm_head.weight", x)[1:]  # the masks predict their own positions
    if "candidate_selector.successor_codebook" not in w:
        return scores.argmax(-1).tolist()
    return _selector_walk(w, dflash, scores, x[1:], next_token)


def _selector_walk(w: dict, dflash: dict, unary, hidden, anchor: int) -> list[int]:
    """DFlash2's greedy walk: at each step the candidate maximising unary + pairwise score after the previous one."""
    top = int(dflash["selector_top_k"])
    candidates = unary.topk(top, dim=-1).indices
    pred, succ = w["candidate_selector.predecessor_codebook"], w["candidate_selector.successor_codebook"]
    shared = hidden @ w["candidate_selector.hidden_projection.weight"].T
    chosen, previous = [], anchor
    for step in range(len(candidates)):
        edge = (pred[previous] * shared[step]) @ succ[candidates[step]].T
        previous = int(candidates[step][(unary[step][candidates[step]] + edge).argmax()])
        chosen.append(previous)
    return chosen
