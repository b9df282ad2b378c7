"""Parameter counts from a checkpoint's config.json alone, split by how vLLM shards them across GPUs.

Families: dense, MoE (routed + shared experts, dense first layers), MLA (DeepSeek/Kimi/GLM low-rank attention,
DSA indexer), linear-attention hybrids (Qwen3-Next gated delta net, Kimi KDA), sliding/full mixes, and the
vision tower of multimodal configs. Norms and biases are left out (well under 0.1 %).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Params:
    """Parameter counts by sharding: TP-split linear layers, expert weights, replicated ones, embeddings."""

    embed: int = 0  # vocab-parallel input embedding (first PP stage)
    lm_head: int = 0  # output head; 0 when tied to the embedding (last PP stage)
    layers: int = 0  # TP-split linear weights of every decoder layer (attention, dense MLP, shared experts)
    experts: int = 0  # routed experts: split by EP (TP×DP ranks) or by TP
    replicated: int = 0  # every rank holds them (MLA down-projections, routers)
    vision: int = 0  # multimodal encoder, TP-split
    num_layers: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.embed + self.lm_head + self.layers + self.experts + self.replicated + self.vision

    def linear(self) -> int:
        """Weights a weight-quantization method stores quantized (everything but embeddings and the head)."""
        return self.layers + self.experts + self.replicated


def _text(config: dict) -> dict:
    """The language model's config (text_config / llm_config of multimodal checkpoints), top-level keys under it."""
    for key in ("text_config", "llm_config", "language_config", "transformer_layer_config"):
        if isinstance(config.get(key), dict):
            return {**config, **config[key]}
    return config


def _attention(c: dict) -> tuple[int, int]:
    """(TP-split, replicated) parameters of one full-attention layer."""
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    if c.get("kv_lora_rank"):
        rope, nope = c.get("qk_rope_head_dim", 64), c.get("qk_nope_head_dim", 128)
        v_dim, kv_rank, q_rank = c.get("v_head_dim", nope), c["kv_lora_rank"], c.get("q_lora_rank")
        split = kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden
        replicated = hidden * (kv_rank + rope)
        if q_rank:
            replicated += hidden * q_rank
            split += q_rank * heads * (nope + rope)
        else:
            split += hidden * heads * (nope + rope)
        if c.get("index_n_heads"):  # DSA indexer (GLM-5, DeepSeek-V3.2)
            index_dim = c.get("index_head_dim", 128)
            replicated += (q_rank or hidden) * c["index_n_heads"] * index_dim + hidden * (index_dim + c["index_n_heads"])
        return split, replicated
    head_dim = c.get("head_dim") or hidden // heads
    kv_heads = c.get("num_key_value_heads") or _falcon_kv_heads(c) or heads
    gate = 2 if c.get("model_type", "").startswith(("qwen3_next", "qwen3_5")) else 1  # gated attention output
    return hidden * head_dim * (gate * heads + 2 * kv_heads) + heads * head_dim * hidden, 0


def _falcon_kv_heads(c: dict) -> int | None:
    """Falcon's KV heads as vLLM's FalconAttention takes them: num_kv_heads with the new decoder, else one
    under multi_query (Falcon-7B/40B)."""
    if c.get("new_decoder_architecture"):
        return c.get("num_kv_heads")
    return 1 if c.get("multi_query") else None


def _linear_attention(c: dict) -> int:
    """Parameters of one linear-attention layer (gated delta net, or Kimi's KDA)."""
    hidden = c["hidden_size"]
    kda = c.get("linear_attn_config")
    if isinstance(kda, dict) or c.get("linear_num_heads"):  # KDA: Kimi-Linear / Kimi-K3, GLM-5.3-Flash
        kda = kda if isinstance(kda, dict) else {"num_heads": c["linear_num_heads"], "head_dim": c["linear_head_dim"],
                                                 "short_conv_kernel_size": c.get("linear_conv_kernel_dim", 4)}
        heads, dim, kernel = kda.get("num_heads", c["num_attention_heads"]), kda["head_dim"], kda.get(
            "short_conv_kernel_size", 4)
        # q, k, v, o; the low-rank decay (f_a, f_b) and output-gate (g_a, g_b) projections; beta; short convs
        return (4 * hidden * heads * dim + 2 * (hidden * dim + dim * heads * dim) + hidden * heads
                + 3 * heads * dim * kernel)
    k_heads, v_heads = c["linear_num_key_heads"], c["linear_num_value_heads"]
    k_dim, v_dim, kernel = c["linear_key_head_dim"], c["linear_value_head_dim"], c.get("linear_conv_kernel_dim", 4)
    qkvz = hidden * (2 * k_heads * k_dim + 2 * v_heads * v_dim)
    return qkvz + hidden * 2 * v_heads + (2 * k_heads * k_dim + v_heads * v_dim) * kernel + v_heads * v_dim * hidden


def layer_kinds(c: dict) -> list[str]:
    """'full', 'sliding', 'chunked' (Llama 4's local chunks), 'linear', or 'none' (a layer without attention,
    e.g. NemotronH's MLP and MoE blocks) per decoder layer."""
    count = c["num_hidden_layers"]
    types = c.get("layer_types")
    # layer_types first: GLM-5.3-Flash carries a 0-based kda_layers beside it, and its vLLM class reads
    # layer_types (models/glm5next/common/model.py _is_kda_layer); Kimi's classes read the 1-based kda_layers.
    if isinstance(types, list) and len(types) == count:
        return ["linear" if "linear" in t else "sliding" if "sliding" in t else "chunked" if "chunked" in t
                else "none" if t in ("mlp", "moe") else "full" for t in types]
    kda = c.get("linear_attn_config")
    if isinstance(kda, dict) and kda.get("kda_layers"):
        linear = set(kda["kda_layers"])  # 1-based in Kimi's configs (KimiLinearConfig.is_kda_layer)
        return ["linear" if i + 1 in linear else "full" for i in range(count)]
    rope = c.get("no_rope_layers")  # Llama 4 without layer_types: the RoPE layers (1) attend within chunks
    if c.get("attention_chunk_size") and isinstance(rope, list) and len(rope) == count:
        return ["chunked" if uses_rope else "full" for uses_rope in rope]
    pattern = c.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0 and c.get("sliding_window"):  # Gemma-3: every pattern-th is global
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(count)]
    if c.get("full_attention_interval") and c.get("linear_num_key_heads"):
        interval = c["full_attention_interval"]
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(count)]
    return ["full"] * count


def _is_moe_layer(c: dict, index: int, experts: int) -> bool:
    if not experts:
        return False
    kinds = c.get("mlp_layer_types")
    if isinstance(kinds, list) and index < len(kinds):
        return kinds[index] == "sparse"
    if index < (c.get("first_k_dense_replace") or 0) or index in (c.get("mlp_only_layers") or []):
        return False
    if c.get("moe_layer_freq"):  # DeepSeek/Kimi/GLM: after the dense first layers, every freq-th
        return index % c["moe_layer_freq"] == 0
    step = c.get("decoder_sparse_step") or c.get("interleave_moe_layer_step") or 1  # Qwen MoE, Llama 4
    return (index + 1) % step == 0


def _experts(c: dict) -> int:
    for key in ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"):
        if isinstance(c.get(key), int) and c[key] > 1:
            return c[key]
    return 0


# Families whose MLP is two matrices (up, down; no gate) name its width their own way: OPT, Falcon, GPT-2/GPT-J.
# GPT-2 and GPT-J write n_inner: null for the default of four times the width.
_UNGATED_WIDTH = ("ffn_dim", "ffn_hidden_size", "n_inner")


def _dense_mlp(c: dict) -> int:
    hidden = c["hidden_size"]
    for key in _UNGATED_WIDTH:
        if key in c and "intermediate_size" not in c:
            return 2 * hidden * (c[key] or 4 * hidden)
    return 3 * hidden * (c.get("intermediate_size_mlp") or c["intermediate_size"])


def _mlp(c: dict, moe: bool) -> tuple[int, int, int]:
    """(TP-split dense/shared, routed experts, replicated router) parameters of one layer's MLP."""
    hidden = c["hidden_size"]
    if not moe:
        return _dense_mlp(c), 0, 0
    experts = _experts(c)
    size = c.get("moe_intermediate_size") or c["intermediate_size"]
    shared = c.get("shared_expert_intermediate_size") or (c.get("n_shared_experts") or c.get(
        "num_shared_experts") or 0) * size
    if c.get("model_type") == "llama4_text":
        shared = c["intermediate_size"]  # one shared expert of the routed size
    return 3 * hidden * shared, 3 * hidden * size * experts, hidden * experts


def decoder_layer(c: dict, index: int, kind: str) -> tuple[int, int, int]:
    """(TP-split, experts, replicated) parameters of decoder layer `index`."""
    split, replicated = ((0, 0) if kind == "none" else (_linear_attention(c), 0) if kind == "linear"
                         else _attention(c))
    dense, experts, router = _mlp(c, _is_moe_layer(c, index, _experts(c)))
    return split + dense, experts, replicated + router


def _vision(config: dict) -> int:
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    width = vision.get("hidden_size") or vision.get("width") or vision.get("embed_dim") or 0
    depth = vision.get("num_hidden_layers") or vision.get("depth") or vision.get("num_layers") or 0
    inner = vision.get("intermediate_size") or 4 * width
    return depth * (4 * width * width + 2 * width * inner)


def count(config: dict) -> Params:
    """Parameters of the checkpoint's main model (MTP layers are counted by mtp_layers_params)."""
    c = _text(config)
    vocab, hidden = c["vocab_size"], c["hidden_size"]
    params = Params(embed=vocab * hidden, num_layers=c["num_hidden_layers"], vision=_vision(config))
    tied = config.get("tie_word_embeddings", c.get("tie_word_embeddings", False))
    params.lm_head = 0 if tied else vocab * hidden
    for index, kind in enumerate(layer_kinds(c)):
        split, experts, replicated = decoder_layer(c, index, kind)
        params.layers, params.experts, params.replicated = (params.layers + split, params.experts + experts,
                                                            params.replicated + replicated)
    return params


def mtp_layers_params(config: dict, layers: int) -> Params:
    """`layers` MTP modules: one decoder layer each (MoE where the model is) plus the 2H→H projection."""
    c = _text(config)
    last = c["num_hidden_layers"]
    split, experts, replicated = decoder_layer(c, last, "full")
    hidden = c["hidden_size"]
    return Params(layers=layers * (split + 2 * hidden * hidden), experts=layers * experts,
                  replicated=layers * replicated, num_layers=layers)


def eagle_draft_params(config: dict, target_hidden: int) -> Params:
    """An EAGLE/EAGLE3/DFlash head: its decoder layers, the fc over aux states, its own embedding and head."""
    c = _text(config)
    hidden = c["hidden_size"]
    params = count({**c, "tie_word_embeddings": False, "vocab_size": c.get("draft_vocab_size") or c["vocab_size"]})
    params.embed = c["vocab_size"] * hidden
    aux = len(c.get("eagle_aux_hidden_state_layer_ids") or (c.get("dflash_config") or {}).get(
        "target_layer_ids") or [0, 0, 0])
    params.layers += aux * (c.get("target_hidden_size") or target_hidden) * hidden
    return params
