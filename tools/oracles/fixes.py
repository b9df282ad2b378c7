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


def glm5_next_vl(data: dict) -> None:
    """vLLM's GLM-5.3-Flash reads fields of the published text config that transformers' class does not write
    (the text-only stand-in in targets.py carries the same): the kinds transformers' model always builds, namely
    hyper-connection residual streams (mhc), NoPE latent attention, a sigmoid router with the noaux_tc correction
    bias, the indexer's interleaved rotary half (no rotary part at all here), one MTP layer (outside the forward)."""
    glm5_next(data)
    _text(data).update(mhc=True, mla_use_nope=True, scoring_func="sigmoid", topk_method="noaux_tc",
                       indexer_rope_interleave=True, num_nextn_predict_layers=1)


def molmo2(data: dict) -> None:
    """Molmo2's adapter reads two vision layers (published 24 and 18 of 25): here the tiny tower's last two."""
    data["vision_config"]["num_hidden_layers"] = 2
    data["adapter_config"]["vision_feature_layer"] = [-1, -2]


def muse_spark(data: dict) -> None:
    """The audio encoder's output is scattered onto the text embeddings: its width is the text width.
    vLLM reads num_shared_experts, which transformers' class omits (its MoE block has routed experts only) and
    vLLM's config class accepts only as 0."""
    for key in ("audio_config", "vision_config"):
        if isinstance(data.get(key), dict) and "out_hidden_size" in data[key]:
            data[key]["out_hidden_size"] = HIDDEN
    _text(data)["num_shared_experts"] = 0


def funaudiochat(data: dict) -> None:
    """FunAudioChat's discrete audio encoder (speech tokens grouped five to one onto the text embeddings) reads
    codebook_size and pad_token_id, which vLLM's config class leaves unset (None): a speech vocabulary of 6565
    (a third-party port's default: CosyVoice's 6561 tokens and specials; not checked against the published
    config.json) with its last token as padding, and the text width as output width (published: 3584)."""
    audio = data["audio_config"]
    audio.update(codebook_size=6565, pad_token_id=6564, output_dim=HIDDEN)
    data["hidden_size"] = HIDDEN


def voxtral(data: dict) -> None:
    """vLLM's Voxtral reads the Mistral-format encoder fields (params.json's audio_encoding_args and
    downsample_args), which transformers' encoder config does not write. transformers' projector takes four
    consecutive encoder frames at once (its input is the encoder's intermediate_size, 5120 = 4 x 1280): that is
    Mistral's downsample_factor (4 published); Whisper's mel front end, which Voxtral keeps (16 kHz, 400-sample
    window, 160 hop, 30 s chunks, no global log-mel maximum)."""
    audio = data["audio_config"]
    audio.update(downsample_factor=audio["intermediate_size"] // audio["hidden_size"], sampling_rate=16000,
                 window_size=400, hop_length=160, chunk_length_s=30, global_log_mel_max=None)


def step3_text(data: dict) -> None:
    """Step-3's vLLM class parses moe_layers_enum as the comma-separated string published configs carry; vLLM's
    config class defaults it to a tuple (MoE from layer 4), which the class cannot parse. Here every layer after
    the first is MoE."""
    data["moe_layers_enum"] = ",".join(str(i) for i in range(1, LAYERS))


def param2moe(data: dict) -> None:
    """vLLM's Param2-MoE reads rope_theta as an attribute (published: 1e6, rope_scaling null); the Llama stand-in's
    config class (transformers 5) folds a rope_theta field into rope_parameters. vLLM restores rope_theta from the
    legacy name rotary_emb_base, which the class keeps: the stand-in's own theta under that name."""
    data["rotary_emb_base"] = data["rope_parameters"]["rope_theta"]


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


def _first_dense(text: dict) -> int:
    """vLLM's `first_k_dense_replace` agreeing with transformers' `mlp_layer_types` (dense layers, then MoE)."""
    kinds = text["mlp_layer_types"]
    count = next((i for i, kind in enumerate(kinds) if kind != "dense"), len(kinds))
    if any(kind != "sparse" for kind in kinds[count:]):
        raise ValueError(f"mlp_layer_types {kinds} is not dense layers then MoE layers")
    return count


def glm4_moe_lite(data: dict) -> None:
    """GLM-4.7-Flash: vLLM reads first_k_dense_replace (published 1), transformers mlp_layer_types (made to agree)."""
    noaux_tc(data)
    text = _text(data)
    text["first_k_dense_replace"] = _first_dense(text)


def hy_v3(data: dict) -> None:
    """Hy3: vLLM reads the fields the published config.json carries (tencent/Hy3-preview: first_k_dense_replace 1,
    expert_hidden_dim = moe_intermediate_size, qk_norm and route_norm on); transformers' class writes none of them
    and always normalises q/k and the top-k weights, its dense layers given by mlp_layer_types (made to agree)."""
    text = _text(data)
    text.update(first_k_dense_replace=_first_dense(text), expert_hidden_dim=text["moe_intermediate_size"],
                qk_norm=True, route_norm=True)


def minimax_m2(data: dict) -> None:
    """MiniMax-M2: vLLM reads rotary_dim (published 64 of a 128 head), scoring_func (published sigmoid) and
    use_routing_bias (published true), as transformers' model always routes (sigmoid plus correction bias); the
    rotary half also set as the partial_rotary_factor transformers' rotary embedding reads."""
    text = _text(data)
    text.update(rotary_dim=HEAD_DIM // 2, scoring_func="sigmoid", use_routing_bias=True)
    text["rope_parameters"] = {**(text.get("rope_parameters") or {}), "partial_rotary_factor": 0.5}


def llama4(data: dict) -> None:
    """Published Llama-4 configs route each token to one expert (Scout and Maverick: num_experts_per_tok 1); the
    CPU MoE applies the router weight to the input only for top-1."""
    _text(data)["num_experts_per_tok"] = 1


def qwen3_vl_moe(data: dict) -> None:
    """vLLM's Qwen3-MoE block reads norm_topk_prob (published Qwen3-VL-30B-A3B: true); transformers' router always
    renormalises the top-k weights and its config class does not write the field."""
    _text(data)["norm_topk_prob"] = True


def glm4v_moe(data: dict) -> None:
    """GLM-4.5V's text model as vLLM's GLM-4.5 reads it: head_dim (published 128) and use_qk_norm (published false),
    neither written by transformers' config class (its model: hidden_size // heads, no q/k norm)."""
    text = _text(data)
    text.update(head_dim=HIDDEN // text["num_attention_heads"], use_qk_norm=False)


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


def zamba2(data: dict) -> None:
    """Zamba2's shared attention is twice the model width; transformers derives its head from that (2 x 128 / 4),
    vLLM reads the field, which the generic shrink set to the common head (32). vLLM's Zamba2 attention has no
    grouped KV heads, as no published Zamba2 does (32 query and 32 KV heads)."""
    data["attention_head_dim"] = data["attention_hidden_size"] // data["num_attention_heads"]
    data["num_key_value_heads"] = data["num_attention_heads"]


def nemotron_h(data: dict) -> None:
    """Nemotron-H's layer count is the length of its layer pattern (transformers derives num_hidden_layers from
    it), which the shrink leaves at the class default's four layers: that pattern (Mamba, MoE, attention, MLP)
    twice, every kind the published hybrid_override_pattern strings use."""
    text = _text(data)
    kinds = text.get("layers_block_type") or ["linear_attention", "moe", "full_attention", "mlp"]
    text["layers_block_type"] = (kinds * LAYERS)[:LAYERS]


def lfm2(data: dict) -> None:
    """vLLM's LFM2 sizes its MLP input by block_dim and its short convolution by conv_dim, which published
    config.json files carry (LiquidAI/LFM2-1.2B: both 2048, its hidden_size) and transformers' class does not
    write (its model uses hidden_size for both). transformers' default makes every layer attention; LFM2
    interleaves short-convolution layers (published full_attn_idxs 2, 5, 8, 10, 12, 14 of 16): here the LFM2-MoE
    pattern, full attention every fourth layer."""
    text = _text(data)
    text.update(block_dim=text["hidden_size"], conv_dim=text["hidden_size"])
    text["layer_types"] = ["full_attention" if i % 4 == 3 else "conv" for i in range(LAYERS)]
    text["full_attn_idxs"] = [i for i, kind in enumerate(text["layer_types"]) if kind == "full_attention"]


def mimo_v2_flash(data: dict) -> None:
    """vLLM's MiMo-V2-Flash reads the layout of the published config.json (XiaomiMiMo/MiMo-V2-Flash), which
    transformers' class rewrites into layer_types, mlp_layer_types and per-kind rope_parameters: the published
    fields, derived from the model transformers builds. hybrid_layer_pattern is 1 for sliding-window layers,
    moe_layer_freq 1 for MoE layers; sliding layers have the same query heads and head sizes and twice the KV
    heads (published: 64 and 4 full, 64 and 8 sliding) and attention sinks; the published sliding_window_size
    (128) is transformers' sliding_window less one (the query); rope_theta 5e6 (full), swa_rope_theta 1e4, one
    partial_rotary_factor (0.334); layernorm_epsilon is rms_norm_eps."""
    text = _text(data)
    kinds, mlps, rope = text["layer_types"], text["mlp_layer_types"], text["rope_parameters"]
    text["hybrid_layer_pattern"] = [int(kind == "sliding_attention") for kind in kinds]
    text["moe_layer_freq"] = [int(kind == "sparse") for kind in mlps]
    text.update(swa_num_attention_heads=text["num_attention_heads"],
                swa_num_key_value_heads=2 * text["num_key_value_heads"], swa_head_dim=text["head_dim"],
                swa_v_head_dim=text["v_head_dim"], sliding_window_size=text["sliding_window"] - 1,
                add_swa_attention_sink_bias=True, add_full_attention_sink_bias=False,
                rope_theta=rope["full_attention"]["rope_theta"], swa_rope_theta=rope["sliding_attention"]["rope_theta"],
                partial_rotary_factor=rope["full_attention"]["partial_rotary_factor"],
                layernorm_epsilon=text["rms_norm_eps"])


def audio_encoder_defaults(data: dict) -> None:
    """vLLM 0.34.0's audio encoders read fields the configs transformers writes for these wrappers leave out: the
    Whisper encoder's scale_embedding and the Qwen3-Omni audio encoder's conv_chunksize. Each gets the default of
    the transformers config its encoder comes from (WhisperConfig: False; Qwen3-Omni's audio encoder: 500)."""
    audio = data["audio_config"]
    if audio.get("model_type") == "qwen3_asr_encoder":
        audio.setdefault("conv_chunksize", 500)
    else:
        audio.setdefault("scale_embedding", False)


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
    "Glm4MoeLiteForCausalLM": glm4_moe_lite,
    "HYV3ForCausalLM": hy_v3,
    "MiniMaxM2ForCausalLM": minimax_m2,
    "Llama4ForCausalLM": llama4,
    "Qwen3VLMoeForConditionalGeneration": qwen3_vl_moe,
    "Glm4vMoeForConditionalGeneration": glm4v_moe,
    "Qwen2_5OmniForConditionalGeneration": qwen_omni,
    "Qwen3OmniMoeForConditionalGeneration": qwen_omni,
    "DiffusionGemmaForBlockDiffusion": diffusion_gemma,
    "Glm5NextForConditionalGeneration": glm5_next_vl,
    "Glm5NextForCausalLM": glm5_next,
    "Molmo2ForConditionalGeneration": molmo2,
    "MuseSparkForConditionalGeneration": muse_spark,
    "KimiLinearForCausalLM": kimi_linear,
    "KimiK3ForConditionalGeneration": kimi_k3,
    "FunAudioChatForConditionalGeneration": funaudiochat,
    "VoxtralForConditionalGeneration": voxtral,
    "Step3TextForCausalLM": step3_text,
    "Param2MoEForCausalLM": param2moe,
    "NemotronHForCausalLM": nemotron_h,
    "NemotronH_Omni_Reasoning_V3": nemotron_h,
    "Lfm2ForCausalLM": lfm2,
    "Lfm2VlForConditionalGeneration": lfm2,
    "MiMoV2FlashForCausalLM": mimo_v2_flash,
    "Zamba2ForCausalLM": zamba2,
    "MossTranscribeDiarizeForConditionalGeneration": audio_encoder_defaults,
    "Qwen3ASRForConditionalGeneration": audio_encoder_defaults,
}
