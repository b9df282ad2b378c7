"""Per-architecture corrections after the generic shrink: fields that must agree with each other.

Each fix takes the config as a dict (after shrink.py) and edits it in place; the reason is in its docstring.
"""

from __future__ import annotations

from shrink import FFN, HEAD_DIM, HEADS, HIDDEN, LAYERS, SMALL


def _text(data: dict) -> dict:
    return data.get("text_config") or data


def mamba2(data: dict) -> None:
    """Mamba-2 checks hidden_size * expand == num_heads * head_dim (2 * 128 = 8 * 32)."""
    data["num_heads"] = 2 * HIDDEN // HEAD_DIM


def qwen4_exp(data: dict) -> None:
    """Its indexed-attention layers need the QSA indexer, whose fields default to unset."""
    _text(data).update(indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=HEAD_DIM, indexer_budget=64,
                       indexer_compress_ratio=4)


def lfm2_moe(data: dict) -> None:
    """LFM2-MoE has no default layer pattern: short-convolution layers with full attention every fourth."""
    data["layer_types"] = ["full_attention" if i % 4 == 3 else "conv" for i in range(LAYERS)]


def cohere_compass(data: dict) -> None:
    """Its rotary embedding reads one rope entry per layer type."""
    text = _text(data)
    text["rope_parameters"] = {kind: {"rope_type": "default", "rope_theta": 10000.0}
                               for kind in set(text.get("layer_types") or ["full_attention"])}


def dbrx(data: dict) -> None:
    """DBRX's attention reads rope_theta from its attention sub-config."""
    data.setdefault("attn_config", {})["rope_theta"] = 10000.0


def step3p7(data: dict) -> None:
    """Step-3.7 builds a sliding-window mask and needs the window."""
    _text(data)["sliding_window"] = 64


def gemma4(data: dict) -> None:
    """Gemma 4's global layers take their own, wider head (512 published; 64 here)."""
    text = _text(data)
    text["per_layer_config"] = {k: {**v, "head_dim": 2 * HEAD_DIM} if "head_dim" in v else v
                                for k, v in (text.get("per_layer_config") or {}).items()}
    if "global_head_dim" in text:
        text["global_head_dim"] = 2 * HEAD_DIM


def gemma4_layers(data: dict) -> None:
    """Every full-attention layer of the tiny Gemma 4 gets the global head (its config must be homogeneous)."""
    gemma4(data)
    text = _text(data)
    # Five sliding layers, then a global one; the config makes the last layer global too.
    kinds = ["full_attention" if i % 6 == 5 or i == LAYERS - 1 else "sliding_attention" for i in range(LAYERS)]
    text["layer_types"] = kinds
    text["per_layer_config"] = {f"{i:02d}": {"head_dim": 2 * HEAD_DIM} for i, kind in enumerate(kinds)
                                if kind == "full_attention"}


def diffusion_gemma(data: dict) -> None:
    """DiffusionGemma's MoE block sizes default to unset."""
    gemma4_layers(data)
    _text(data).update(num_experts=4, top_k_experts=2, moe_intermediate_size=128)


SUB_CONFIG_COMMON = ("_name_or_path", "output_attentions", "output_hidden_states", "return_dict", "dtype",
                     "chunk_size_feed_forward", "is_encoder_decoder", "id2label", "label2id", "problem_type",
                     "architectures", "model_type", "transformers_version")


def dbrx_clip(data: dict) -> None:
    """DBRX's default clip_qkv (None) reaches torch.clamp with neither bound in transformers; published: 8.
    Its attention and FFN sub-configs keep only their own fields (older transformers reject the common ones)."""
    dbrx(data)
    data.setdefault("attn_config", {})["clip_qkv"] = 8.0
    for key in ("attn_config", "ffn_config"):
        data[key] = {k: v for k, v in data.get(key, {}).items() if k not in SUB_CONFIG_COMMON}


def glm5_next(data: dict) -> None:
    """GLM-5.3-Flash's DSA attention layers are NoPE: no rotary part in the latent head."""
    text = _text(data)
    text.update(qk_rope_head_dim=0, qk_head_dim=text.get("qk_nope_head_dim", HEAD_DIM))


def molmo2(data: dict) -> None:
    """Molmo2's adapter reads two vision layers (published 24 and 18 of 25): here the tiny tower's last two."""
    data["vision_config"]["num_hidden_layers"] = 2
    data["adapter_config"]["vision_feature_layer"] = [-1, -2]


def muse_spark(data: dict) -> None:
    """The audio encoder's output is scattered onto the text embeddings: its width is the text width."""
    for key in ("audio_config", "vision_config"):
        if isinstance(data.get(key), dict) and "out_hidden_size" in data[key]:
            data[key]["out_hidden_size"] = HIDDEN


def afmoe(data: dict) -> None:
    """vLLM's AFMoE reads score_func, route_norm and the expert-group fields, which published config.json files
    carry (arcee-ai/Trinity-Nano: n_group 1, topk_group 1) and transformers' class omits."""
    data.setdefault("score_func", "sigmoid")
    data.setdefault("route_norm", True)
    data.setdefault("n_group", 1)
    data.setdefault("topk_group", 1)


def noaux_tc(data: dict) -> None:
    """DeepSeek-V3-style routers: the published configs route with `noaux_tc` (transformers always builds the
    correction bias, vLLM only for that method)."""
    _text(data)["topk_method"] = "noaux_tc"


def axk1(data: dict) -> None:
    """A.X-K1: vLLM gives every layer the post-MLP norm, transformers only MoE layers: all layers MoE here."""
    noaux_tc(data)
    data["first_k_dense_replace"] = 0


def gemma4_vision(data: dict) -> None:
    """Gemma 4's multimodal classes build a vision tower; transformers' default config has none."""
    gemma4_layers(data)
    if not data.get("vision_config"):
        data["vision_config"] = {"model_type": "gemma4_vision", "num_hidden_layers": 1}


def qwen_omni(data: dict) -> None:
    """Qwen-Omni's speech output (talker, token2wav) is not what vLLM serves as this architecture: off."""
    data["enable_audio_output"] = False


def falcon(data: dict) -> None:
    """vLLM's Falcon MLP is 4 x hidden (as in every published Falcon); it does not read ffn_hidden_size."""
    data["ffn_hidden_size"] = 4 * HIDDEN


def glm4_moe(data: dict) -> None:
    """vLLM's GLM-4.5 attention reads head_dim, which every published config carries (128) and transformers'
    config class does not write (its model falls back to hidden_size // heads, the value set here)."""
    data["head_dim"] = HIDDEN // data["num_attention_heads"]


KIMI_FULL = [i for i in range(1, LAYERS + 1) if i % 4 == 0 or i == LAYERS]  # 1-indexed, as published


def _kimi_layers(heads: int, head_dim: int, conv: int, **gate) -> dict:
    """Kimi's `linear_attn_config`: full (latent) attention every fourth layer and the last, KDA elsewhere."""
    return dict(full_attn_layers=KIMI_FULL, kda_layers=[i for i in range(1, LAYERS + 1) if i not in KIMI_FULL],
                num_heads=heads, head_dim=head_dim, short_conv_kernel_size=conv, **gate)


def kimi_linear(data: dict) -> None:
    """Published Kimi-Linear configs carry `linear_attn_config` (KDA and full-attention layers, 1-indexed) and
    NoPE latent attention, which vLLM reads; transformers' class writes neither (its layer_types made to agree)."""
    data["linear_attn_config"] = _kimi_layers(data["linear_num_heads"], data["linear_head_dim"],
                                              data["linear_conv_kernel_dim"])
    data["layer_types"] = ["full_attention" if i + 1 in KIMI_FULL else "linear_attention" for i in range(LAYERS)]
    data["mla_use_nope"] = True


def kimi_k3(data: dict) -> None:
    """vLLM's Kimi-K3 config defaults its text part to a bare Kimi-Linear (no latent heads, no experts): the
    published K3 text config's kinds, sized down (latent MoE at half the width, SiTU, attention residuals in
    blocks: 12 of 93 layers published, 2 of 8 here); the vision tower's own layer count to one."""
    text = data["text_config"]
    text.update(q_lora_rank=SMALL["q_lora_rank"], kv_lora_rank=SMALL["kv_lora_rank"],
                qk_nope_head_dim=SMALL["qk_nope_head_dim"], qk_rope_head_dim=SMALL["qk_rope_head_dim"],
                v_head_dim=SMALL["v_head_dim"], mla_use_nope=True, mla_use_output_gate=True,
                num_experts=4, num_experts_per_token=2, num_shared_experts=2, moe_intermediate_size=FFN // 2,
                routed_expert_hidden_size=HIDDEN // 2, latent_moe_use_norm=True, hidden_act="situ",
                activation_situ_beta=4.0, activation_situ_linear_beta=25.0, moe_router_activation_func="sigmoid",
                topk_method="noaux_tc", moe_renormalize=True, routed_scaling_factor=1.0, first_k_dense_replace=1,
                moe_layer_freq=1, attn_res_block_size=2)
    text["linear_attn_config"] = _kimi_layers(HEADS, HEAD_DIM, 4, use_full_rank_gate=True, gate_lower_bound=-5.0)
    data["vision_config"]["vt_num_hidden_layers"] = 1


FIXES = {
    "Glm4MoeForCausalLM": glm4_moe,
    "FalconForCausalLM": falcon,
    "Mamba2ForCausalLM": mamba2,
    "Qwen4ExpForCausalLM": qwen4_exp,
    "Qwen4ExpForConditionalGeneration": qwen4_exp,
    "Lfm2MoeForCausalLM": lfm2_moe,
    "CohereCompassForConditionalGeneration": cohere_compass,
    "DbrxForCausalLM": dbrx_clip,
    "Step3p7ForConditionalGeneration": step3p7,
    "Gemma4ForCausalLM": gemma4_layers,
    "Gemma4ForConditionalGeneration": gemma4_vision,
    "Gemma4UnifiedForConditionalGeneration": gemma4_vision,
    "AfmoeForCausalLM": afmoe,
    "AXK1ForCausalLM": axk1,
    "DeepseekV3ForCausalLM": noaux_tc,
    "DeepseekV32ForCausalLM": noaux_tc,
    "GlmMoeDsaForCausalLM": noaux_tc,
    "Glm4MoeLiteForCausalLM": noaux_tc,
    "Qwen2_5OmniForConditionalGeneration": qwen_omni,
    "Qwen3OmniMoeForConditionalGeneration": qwen_omni,
    "DiffusionGemmaForBlockDiffusion": diffusion_gemma,
    "Glm5NextForConditionalGeneration": glm5_next,
    "Glm5NextForCausalLM": glm5_next,
    "Molmo2ForConditionalGeneration": molmo2,
    "MuseSparkForConditionalGeneration": muse_spark,
    "KimiLinearForCausalLM": kimi_linear,
    "KimiK3ForConditionalGeneration": kimi_k3,
}
