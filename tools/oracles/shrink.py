"""Shrink a config dict to a tiny model of the same kind: a few layers, small widths, the same layer pattern."""

from __future__ import annotations

LAYERS = 8  # EAGLE3's default aux layers (2, L // 2, L - 3) are three distinct layers from 8 on
HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 128, 256, 4, 2, 32  # head_dim 32: the CPU attention backend's minimum
VOCAB, POSITIONS = 512, 512

# Text-model fields, by role; only fields the config already has are set.
WIDTH = ("hidden_size", "n_embd", "d_model", "dim", "model_dim", "hidden_dim")
FFN_FIELDS = ("intermediate_size", "ffn_dim", "ffn_hidden_size", "n_inner", "decoder_ffn_dim", "intermediate_size_mlp",
              "dense_intermediate_size", "inner_hidden_size")
EXPERT_FFN = ("moe_intermediate_size", "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
              "expert_ffn_hidden_size", "moe_hidden_size", "shared_intermediate_size", "share_expert_dim")
HEAD_COUNT = ("num_attention_heads", "n_head", "n_heads", "num_heads", "decoder_attention_heads",
              "encoder_attention_heads", "swa_num_attention_heads", "num_sliding_attention_heads")
KV_COUNT = ("num_key_value_heads", "num_kv_heads", "num_query_groups", "multi_query_group_num", "n_head_kv",
            "swa_num_key_value_heads")
HEAD_SIZE = ("head_dim", "kv_channels", "attention_head_dim", "swa_head_dim", "head_size")
LAYER_COUNT = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers")
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
EXPERTS_PER_TOKEN = ("num_experts_per_tok", "moe_topk", "moe_k", "num_experts_per_token", "top_k")
SHARED_EXPERTS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
GROUPS = ("n_group", "topk_group", "num_expert_group")
SMALL = {  # latent attention (the published head: CPU and SM90 MLA kernels take no other), linear attention, ...
    "q_lora_rank": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "qk_head_dim": 192, "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_head_dim": 32, "linear_num_heads": 4, "mamba_d_state": 16,
    "ssm_state_size": 16, "state_size": 16, "mamba_n_heads": 8, "mamba_num_heads": 8, "n_mamba_heads": 8,
    "mamba_d_head": 32, "mamba_head_dim": 32, "mamba_headdim": 32, "mamba_n_groups": 1, "mamba_ngroups": 1,
    "n_groups": 1, "index_head_dim": 32, "index_n_heads": 2, "index_topk": 64, "first_k_dense_replace": 1,
    "num_dense_layers": 1, "moe_layer_start_index": 1, "hc_lowrank": 8, "o_lora_rank": 64, "d_rel": 16,
    "ple_embed_dim": 32, "hidden_size_per_layer_input": 32, "vocab_size_per_layer_input": VOCAB,
    "attention_hidden_size": 2 * HIDDEN, "mamba_d_ssm": 2 * HIDDEN, "rotary_dim": HEAD_DIM // 2,
    "word_embed_proj_dim": HIDDEN, "encoder_ffn_dim": FFN,
}
TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "eod_token_id", "sep_token_id", "decoder_start_token_id")
# Encoder sub-configs (vision, audio): one layer, widths left as they are.
ENCODER_LAYERS = ("depth", "num_hidden_layers", "encoder_layers", "num_layers", "n_layers", "layers")


def _set(config: dict, names, value) -> None:
    for name in names:
        if isinstance(config.get(name), int) and not isinstance(config.get(name), bool):
            config[name] = value


def _rope_sections(rope: dict, half: int) -> None:
    """An M-RoPE split (temporal, height, width) of the rotary half-dimension, rescaled to the new head size."""
    for value in rope.values():
        if isinstance(value, dict):
            _rope_sections(value, half)
    sections = rope.get("mrope_section")
    if isinstance(sections, list) and sections and sum(sections) != half:
        scaled = [max(1, round(s * half / sum(sections))) for s in sections]
        scaled[0] += half - sum(scaled)
        rope["mrope_section"] = scaled


def _per_layer(config: dict, old: int, new: int) -> None:
    """Lists with one entry per layer keep their first `new` entries; layer-index lists keep those below `new`;
    dicts keyed by layer index keep the keys below `new`."""
    for name, value in list(config.items()):
        if isinstance(value, dict) and value and all(str(k).isdigit() for k in value):
            config[name] = {k: v for k, v in value.items() if int(k) < new}
            continue
        if not isinstance(value, list) or not value:
            continue
        if len(value) == old and old != new:
            config[name] = value[:new] if old > new else (value * (new // old + 1))[:new]
        elif name.endswith(("_layers", "_idxs", "_layer_ids")) and all(isinstance(v, int) for v in value):
            kept = [v for v in value if v < new]
            config[name] = kept or [min(value[0], new - 1)]


def shrink_text(config: dict, layers: int = LAYERS) -> dict:
    """A text decoder's fields made tiny (in place, returned)."""
    old = next((config[n] for n in LAYER_COUNT if isinstance(config.get(n), int)), None)
    _set(config, WIDTH, HIDDEN)
    _set(config, FFN_FIELDS, FFN)
    _set(config, EXPERT_FFN, FFN // 2)
    _set(config, HEAD_COUNT, HEADS)
    for name in KV_COUNT:  # multi-query models keep one KV head
        if isinstance(config.get(name), int):
            config[name] = min(config[name], KV_HEADS) if config[name] else config[name]
        elif name in config and config[name] is None:
            config[name] = KV_HEADS
    if config.get("kv_lora_rank"):  # latent attention: one latent KV per query head
        _set(config, KV_COUNT, HEADS)
    for name in HEAD_SIZE:
        if name in config and (config[name] is None or isinstance(config[name], int)):
            config[name] = HEAD_DIM
    _set(config, LAYER_COUNT, layers)
    _set(config, POSITION_FIELDS, POSITIONS)
    _set(config, EXPERTS, 4)
    _set(config, EXPERTS_PER_TOKEN, 2)
    if any(isinstance(config.get(n), int) and config[n] > 0 for n in EXPERTS):  # routed: top-k must be set
        for name in EXPERTS_PER_TOKEN + GROUPS:
            if name in config and config[name] is None:
                config[name] = 2 if name in EXPERTS_PER_TOKEN else 1
    _set(config, SHARED_EXPERTS, 1)
    _set(config, GROUPS, 1)
    for name, value in SMALL.items():
        if name in config and (value is None or isinstance(config[name], int)):
            config[name] = value if value is not None else config[name]
    if isinstance(config.get("vocab_size"), int):
        config["vocab_size"] = VOCAB
    for name in TOKEN_IDS:
        value = config.get(name)
        if isinstance(value, int) and value >= VOCAB:
            config[name] = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}.get(name, 3)
        elif isinstance(value, list):
            config[name] = [v if v < VOCAB else 2 for v in value]
    if old:
        _per_layer(config, old, layers)
    for key in ("rope_parameters", "rope_scaling"):
        if isinstance(config.get(key), dict):
            _rope_sections(config[key], HEAD_DIM // 2)
    return config


def shrink_encoder(config: dict) -> dict:
    """A vision or audio encoder: one layer (its widths stay; the tests never feed it an image)."""
    old = next((config[n] for n in ENCODER_LAYERS if isinstance(config.get(n), int)), None)
    _set(config, ENCODER_LAYERS, 1)
    if old:
        _per_layer(config, old, 1)
    return config
