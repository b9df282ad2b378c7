"""Constructed checkpoints under which target and drafter provably agree: both compute the same next-token map.

Usage: python gpu_constructed.py OUT_DIR  ->  OUT_DIR/constructed_{llama,eagle3,eagle3_blind,mimo,dflash,dflash2}
The targets (a Llama; a MiMo, i.e. Qwen2 layers plus one MTP layer) carry one-hot token codes in their stream:
dimension c(t) holds token t, dimension BIAS a constant, dimension GATE a flag. Layer 0 computes the successor
of the current token under a fixed cycle PI, the other layers are zero (identity on the stream), the lm_head reads
the code back. So greedy decoding from any prompt of TOKENS walks the cycle: next = PI[last].
The cycle only advances where attention read the KV cache correctly: every position writes the same
BIAS-derived constant into V, attention (q = k = 0, uniform over the positions it reads) returns it and o_proj
writes it into GATE, and the MLP's gate opens only when GATE holds that value. A layer that reads zeros (never
written blocks) gets another average, the gate stays shut, and it proposes the current token again: rejected.
Drafters: EAGLE3 (fc copies the first aux state, which already holds the target's next token; its midlayer
advances it), draft_model (the Llama itself), MTP (the MiMo's MTP layer takes the target's last hidden state,
which holds the next token, and advances it with the same gated block), DFlash/DFlash2 (gpu_constructed_dflash.py).
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VOCAB, HIDDEN, HEADS, KV_HEADS, DRAFT_KV_HEADS, HEAD_DIM, FFN, LAYERS = 256, 128, 4, 2, 1, 32, 256, 8
# The EAGLE3 drafter's layer is sliding-window with one KV head: an all-draft KV group of its own.
DRAFT_WINDOW = 64
FIRST = 5  # ids 0-4 are the tokenizer's special tokens (4 is the mask token DFlash drafts with)
# The tokens the map walks; prompts use only these. HEAD_DIM of them, so one KV head's value carries a code
# (the DFlash drafter reads the target's next token from its context's values).
TOKENS = list(range(FIRST, FIRST + HEAD_DIM))
BIAS, GATE = HIDDEN - 2, HIDDEN - 1  # the stream's constant and flag dimensions
S = B = G = 1.0  # magnitudes of the token code, the constant and the flag in the stream
ALPHA = 4.0  # lm_head scale: the chosen token leads every other by ALPHA * sqrt(HIDDEN / 2) = 32 nats
GATE_K = 16.0  # the MLP gate's pre-activation when the flag is right; 0 at half the flag
EPS = 1e-6
K = 3  # drafts per step the constructed drafters are built for (the DFlash drafter has one head per draft)


def _one_cycle(tokens: list[int]) -> dict[int, int]:
    """A single cycle through every token (no fixed points, no short loops), in a seeded random order."""
    order = random.Random(20250).sample(tokens, len(tokens))
    return {a: b for a, b in zip(order, order[1:] + order[:1])}


PI = _one_cycle(TOKENS)
CODE = {t: i for i, t in enumerate(TOKENS)}


def power(token: int, steps: int) -> int:
    """PI applied `steps` times."""
    for _ in range(steps):
        token = PI[token]
    return token


def continuation(prompt: list[int], n: int) -> list[int]:
    """The greedy tokens after `prompt` under the constructed weights: the cycle walked from its last token."""
    return [power(prompt[-1], i) for i in range(1, n + 1)]


def prompts(lengths: list[int], seed: int = 7) -> list[list[int]]:
    """Independent prompts of TOKENS only."""
    rng = random.Random(seed)
    return [[rng.choice(TOKENS) for _ in range(n)] for n in lengths]


def siblings(prefix: int, suffixes: list[int], seed: int = 3) -> list[list[int]]:
    """The shared prefix itself, then prompts that extend it: the shape prefix caching serves (multi-turn).

    The first prompt is exactly the prefix because a sliding-window group keeps its blocks only at a request's
    own replay boundary (prefix_cache_retention_interval 0): a later prompt can hit only where it extends the
    earlier one up to that boundary."""
    rng = random.Random(seed)
    shared = [rng.choice(TOKENS) for _ in range(prefix)]
    return [shared] + [shared + [rng.choice(TOKENS) for _ in range(n)] for n in suffixes]


def rms_scale(*parts: float, width: int = HIDDEN) -> float:
    """What RMSNorm (weight 1) multiplies a stream of these one-hot magnitudes by."""
    return 1.0 / math.sqrt(sum(p * p for p in parts) / width + EPS)


def _cycle_block(torch, qkv_in: int, v_column: int, v_scale: float, kv_heads: int, bias: bool = False) -> dict:
    """q, k, v, o and MLP weights of the layer that advances the cycle (gated on the attention's output)."""
    n1 = rms_scale(S, B, G)
    silu_k = GATE_K / (1.0 + math.exp(-GATE_K))
    q = torch.zeros(HEADS * HEAD_DIM, qkv_in)
    k = torch.zeros(kv_heads * HEAD_DIM, qkv_in)
    v = torch.zeros_like(k)
    v[0, v_column] = 1.0 / v_scale  # value 1 at every position, whatever its token
    o = torch.zeros(HIDDEN, HEADS * HEAD_DIM)
    o[GATE, 0] = G  # query head 0 reads kv head 0: its average value, written into the flag
    rows = len(TOKENS) + 1
    gate, up, down = torch.zeros(FFN, HIDDEN), torch.zeros(FFN, HIDDEN), torch.zeros(HIDDEN, FFN)
    gate[:rows, GATE] = 2 * GATE_K / (n1 * G)
    gate[:rows, BIAS] = -GATE_K / (n1 * B)
    for j in range(len(TOKENS)):
        up[j, j] = 1.0
    up[len(TOKENS), GATE] = 1.0
    for token in TOKENS:  # (PI - I) on the token code, and the flag removed again
        down[CODE[PI[token]], CODE[token]] += 1.0 / (silu_k * n1)
        down[CODE[token], CODE[token]] -= 1.0 / (silu_k * n1)
    down[GATE, len(TOKENS)] = -1.0 / (silu_k * n1)
    block = {"self_attn.q_proj.weight": q, "self_attn.k_proj.weight": k, "self_attn.v_proj.weight": v,
             "self_attn.o_proj.weight": o, "mlp.gate_proj.weight": gate, "mlp.up_proj.weight": up,
             "mlp.down_proj.weight": down, "input_layernorm.weight": torch.ones(HIDDEN),
             "post_attention_layernorm.weight": torch.ones(HIDDEN)}
    if bias:  # Qwen2 projects q, k, v with a bias
        block |= {f"self_attn.{p}_proj.bias": torch.zeros(len(block[f"self_attn.{p}_proj.weight"])) for p in "qkv"}
    return block


def embedding(torch):
    embed = torch.zeros(VOCAB, HIDDEN)
    embed[:, BIAS] = B
    for token in TOKENS:
        embed[token, CODE[token]] = S
    return embed


def _readout(torch):
    head = torch.zeros(VOCAB, HIDDEN)
    for token in TOKENS:
        head[token, CODE[token]] = ALPHA
    return head


def _target_layers(torch, bias: bool = False) -> dict:
    """Layer 0 advances the cycle (its V reads the embedding's constant), layers 1.. are zero."""
    tensors = {f"model.layers.0.{k}": w for k, w in
               _cycle_block(torch, HIDDEN, BIAS, rms_scale(S, B) * B, KV_HEADS, bias).items()}
    for layer in range(1, LAYERS):
        for name, weight in _cycle_block(torch, HIDDEN, BIAS, 1.0, KV_HEADS, bias).items():
            zero = "layernorm" not in name
            tensors[f"model.layers.{layer}.{name}"] = torch.zeros_like(weight) if zero else weight
    return tensors


def llama_config(**extra) -> dict:
    return dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_attention_heads=HEADS,
                head_dim=HEAD_DIM, max_position_embeddings=1024, rms_norm_eps=EPS, hidden_act="silu",
                rope_theta=10000.0, bos_token_id=2, eos_token_id=3, pad_token_id=0, tie_word_embeddings=False,
                torch_dtype="float32", **extra)


def llama(out: Path) -> None:
    """The target: layer 0 advances the cycle, layers 1.. are zero, the lm_head reads the code."""
    import torch

    tensors = {"model.embed_tokens.weight": embedding(torch), "model.norm.weight": torch.ones(HIDDEN),
               "lm_head.weight": _readout(torch)} | _target_layers(torch)
    write_checkpoint(out, llama_config(architectures=["LlamaForCausalLM"], model_type="llama",
                                       num_hidden_layers=LAYERS, num_key_value_heads=KV_HEADS), tensors,
                     tokenizer=True)


def eagle3(out: Path, blind: bool = False) -> None:
    """The EAGLE3 drafter: fc copies the first aux state (the target's next token), the midlayer advances.

    blind: its values are zero, as if every KV slot it read had never been written (the negative control)."""
    import torch

    fc = torch.zeros(HIDDEN, 3 * HIDDEN)
    fc[:, :HIDDEN] = torch.eye(HIDDEN)
    # The midlayer's attention input is [embeds, hidden_norm(hidden)]: the constant is read from the second half.
    block = _cycle_block(torch, 2 * HIDDEN, HIDDEN + BIAS, rms_scale(S, B) * B, DRAFT_KV_HEADS)
    tensors = {"embed_tokens.weight": embedding(torch), "fc.weight": fc, "norm.weight": torch.ones(HIDDEN),
               "lm_head.weight": _readout(torch), "midlayer.hidden_norm.weight": torch.ones(HIDDEN)}
    tensors |= {f"midlayer.{k}": w for k, w in block.items()}
    if blind:
        tensors["midlayer.self_attn.v_proj.weight"].zero_()
    write_checkpoint(out, llama_config(architectures=["LlamaForCausalLMEagle3"], model_type="llama",
                                       num_hidden_layers=1, num_key_value_heads=DRAFT_KV_HEADS,
                                       draft_vocab_size=VOCAB, target_hidden_size=HIDDEN,
                                       layer_types=["sliding_attention"], sliding_window=DRAFT_WINDOW,
                                       target_layer_count=LAYERS), tensors, tokenizer=False)


def mimo(out: Path) -> None:
    """A MiMo target (Qwen2 layers as the Llama's) with one MTP layer that computes the same map.

    The MTP layer sees [hidden_layernorm(target's last hidden), token_layernorm(embedding)]. The target's hidden
    state (MiMo hands it over before the final norm) already holds the code of the next token, so input_proj
    keeps that half, scaled back to the stream's magnitudes, and the gated block advances it once more. Its
    own output, fed back as the hidden state of the next draft step, has the same form: every step advances."""
    import torch

    proj = torch.zeros(HIDDEN, 2 * HIDDEN)
    proj[:, :HIDDEN] = torch.eye(HIDDEN) / rms_scale(S, B)
    mtp = {"token_layernorm.weight": torch.ones(HIDDEN), "hidden_layernorm.weight": torch.ones(HIDDEN),
           "input_proj.weight": proj, "final_layernorm.weight": torch.ones(HIDDEN)}
    mtp |= _cycle_block(torch, HIDDEN, BIAS, rms_scale(S, B) * B, KV_HEADS, bias=True)
    tensors = {"model.embed_tokens.weight": embedding(torch), "model.norm.weight": torch.ones(HIDDEN),
               "lm_head.weight": _readout(torch)} | _target_layers(torch, bias=True)
    tensors |= {f"model.mtp_layers.0.{k}": w for k, w in mtp.items()}
    config = llama_config(architectures=["MiMoForCausalLM"], model_type="qwen2", num_hidden_layers=LAYERS,
                          num_key_value_heads=KV_HEADS, num_nextn_predict_layers=1, use_sliding_window=False)
    write_checkpoint(out, config, tensors, tokenizer=True)


def write_checkpoint(out: Path, config: dict, tensors: dict, tokenizer: bool) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    if tokenizer:
        sys.path.insert(0, str(HERE))
        import tiny_models

        tiny_models.tokenizer(out)


def write(root: Path) -> Path:
    """Every constructed checkpoint (targets, drafters, the blind drafter) under root; return root."""
    sys.path.insert(0, str(HERE))
    import gpu_constructed_dflash

    root = Path(root)
    llama(root / "constructed_llama")
    eagle3(root / "constructed_eagle3")
    eagle3(root / "constructed_eagle3_blind", blind=True)
    mimo(root / "constructed_mimo")
    gpu_constructed_dflash.dflash(root / "constructed_dflash")
    gpu_constructed_dflash.dflash(root / "constructed_dflash2", v2=True)
    return root


if __name__ == "__main__":
    print(write(Path(sys.argv[1])))
