"""Architectures transformers does not name: which config (and which Hugging Face model, if any) stands for them.

ALIASES: vLLM maps the name to the same class as an architecture transformers implements (LLaMAForCausalLM is
LlamaForCausalLM); the checkpoint and the reference states are that model's, with `architectures` renamed.
CONFIG_ONLY: a config vLLM reads (its own config class, or a transformers config with the fields the vLLM class
reads) and no Hugging Face implementation: the loaders are built and run, the aux states have no reference here.
"""

from __future__ import annotations

from shrink import VOCAB

ALIASES = {
    "LLaMAForCausalLM": "LlamaForCausalLM",
    "InternLM3ForCausalLM": "LlamaForCausalLM",
    "IQuestCoderForCausalLM": "LlamaForCausalLM",
    "TeleChat3ForCausalLM": "LlamaForCausalLM",
    "NanbeigeForCausalLM": "LlamaForCausalLM",
    "TransformersForCausalLM": "LlamaForCausalLM",
    "TransformersMoEForCausalLM": "Qwen3MoeForCausalLM",
    "TransformersMultiModalForCausalLM": "Qwen2VLForConditionalGeneration",
    "TransformersMultiModalMoEForCausalLM": "Qwen3VLMoeForConditionalGeneration",
    "ExaoneMoEForCausalLM": "ExaoneMoeForCausalLM",
    "NemotronHPuzzleForCausalLM": "NemotronHForCausalLM",
    "MuseGlimmerForCausalLM": "MuseGlimmerForConditionalGeneration",
    "Qwen2_5OmniModel": "Qwen2_5OmniForConditionalGeneration",
    "NemotronH_Nano_Omni_Reasoning_V3": "NemotronH_Omni_Reasoning_V3",
    "NemotronH_Nano_VL_V2": "NemotronH_Omni_Reasoning_V3",
    "NemotronH_Super_Omni_Reasoning_V3": "NemotronH_Omni_Reasoning_V3",
    "InternS1ForConditionalGeneration": "InternVLForConditionalGeneration",
    "PhiMoEForCausalLM": "PhimoeForCausalLM",
    # Not the same vLLM class, but the same decoder: MiMo is Qwen2's (its MTP layers sit outside the forward).
    "MiMoForCausalLM": "Qwen2ForCausalLM",
}

_LLAMA_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128, norm_topk_prob=True)
# arch -> ("transformers:<model_type>" | "vllm:<model_type>", fields set after the shrink)
CONFIG_ONLY = {
    "InternLM2ForCausalLM": ("transformers:llama", {}),
    "OrionForCausalLM": ("transformers:llama", {}),
    "Step1ForCausalLM": ("transformers:llama", {}),
    "TeleFLMForCausalLM": ("transformers:llama", dict(use_mup=False, mup_scale_factor=1.0, output_mult=1.0)),
    "MiniCPMForCausalLM": ("transformers:llama", dict(scale_emb=1.0, scale_depth=1.0, dim_model_base=128)),
    "ExaoneForCausalLM": ("transformers:llama", dict(activation_function="silu", layer_norm_epsilon=1e-5)),
    "BailingMoeForCausalLM": ("transformers:llama", dict(_LLAMA_MOE, num_shared_experts=1,
                                                         moe_shared_expert_intermediate_size=128,
                                                         first_k_dense_replace=1, use_bias=False,
                                                         use_qkv_bias=False, embedding_dropout=0.0)),
    "BailingMoeV2ForCausalLM": ("transformers:llama", dict(_LLAMA_MOE, num_shared_experts=1,
                                                           moe_shared_expert_intermediate_size=128,
                                                           first_k_dense_replace=1, use_bias=False,
                                                           use_qkv_bias=False, embedding_dropout=0.0)),
    "Param2MoEForCausalLM": ("transformers:llama", dict(_LLAMA_MOE, moe_shared_expert_intermediate_size=128,
                                                        score_function="softmax")),
    "Rnj1ForCausalLM": ("transformers:gemma3_text", {}),
    # Molmo (remote code): Qwen2's decoder plus the fields vLLM's Molmo class reads, with the kinds Molmo-7B-D uses
    # (RMS norms, QKV bias, untied embeddings); the values were not checked against a published config.json.
    "MolmoForCausalLM": ("transformers:qwen2", dict(embedding_size=VOCAB, layer_norm_type="rms", layer_norm_eps=1e-6,
                                                    qkv_bias=True, weight_tying=False, norm_after=False,
                                                    attention_layer_norm=False)),
    "ChatGLMModel": ("vllm:chatglm", dict(original_rope=True, tie_word_embeddings=False)),
    "ChatGLMForConditionalGeneration": ("vllm:chatglm", dict(original_rope=True, tie_word_embeddings=False)),
    "FlintForCausalLM": ("vllm:flint", {}),
    "Step3TextForCausalLM": ("vllm:step3_text", {}),
    "Step3p5ForCausalLM": ("vllm:step3p5", {}),
    "Moondream3ForCausalLM": ("vllm:moondream3", {}),
    "HfMoondream": ("vllm:moondream3", {}),
    "KimiK25ForConditionalGeneration": ("vllm:kimi_k25", {}),
    "KimiK3ForConditionalGeneration": ("vllm:kimi_k3", {}),
    "KimiVLForConditionalGeneration": ("vllm:kimi_vl", {}),
    # GLM-5.3-Flash's published text config: fields vLLM reads that transformers' config class does not write.
    "Glm5NextForCausalLM": ("transformers:glm5_next_text", dict(mhc=True, mla_use_nope=True, scoring_func="sigmoid",
                                                                 topk_method="noaux_tc", indexer_rope_interleave=True,
                                                                 num_nextn_predict_layers=1)),
    "DeepseekV41ForCausalLM": ("vllm:deepseek_v41", {}),
    "BagelForConditionalGeneration": ("vllm:bagel", {}),
    "IsaacForConditionalGeneration": ("vllm:isaac", {}),
    "MiDashengLMModel": ("vllm:midashenglm", {}),
    "FunAudioChatForConditionalGeneration": ("vllm:funaudiochat", {}),
    "UltravoxModel": ("vllm:ultravox", {}),
    "OpenVLAForActionPrediction": ("vllm:openvla", {}),
    "Ovis": ("vllm:ovis", {}),
    "DeepseekVLV2ForCausalLM": ("vllm:deepseek_vl_v2", {}),
    "Dots3NoteForCausalLM": ("vllm:dots3_note", {}),
    "Step3VLForConditionalGeneration": ("vllm:step3_vl", {}),
    "Step5ForConditionalGeneration": ("vllm:step5_vl", {}),
    "UnlimitedOCRForCausalLM": ("vllm:unlimited_ocr", {}),
    "Alpamayo2Super": ("vllm:alpamayo2_super", {}),
    "BailingMoeV3VLForConditionalGeneration": ("vllm:bailing_moe_v3_vl", {}),
}


# Architectures the oracles do not record, and why: a tiny checkpoint of theirs fails where a published one loads,
# so its record would make spec-check refuse deployments that start. docs/supported.md lists them with the reason.
NOT_RECORDED = {
    "Molmo2ForConditionalGeneration": "transformers 5.20 writes Molmo2's native layout (vision_config); vLLM 0.33.0's "
    "class reads the remote-code layout published checkpoints carry (vit_config), so no tiny checkpoint here loads",
    "Glm4MoeLiteForCausalLM": "its states differ from transformers' from the first layer on (5.8e-3 after the "
    "dense, attention-only layer, 2.3e-2 through the MoE layers, neighbouring layers 0.38 to 0.99 apart): a "
    "difference inside its latent attention (DeepSeek-V2's, on the same path, is 7.6e-3), not where the aux states "
    "are taken; a record would call the capture wrong until that difference is explained",
}


def config_class(source: str):
    """The config class a CONFIG_ONLY source names."""
    kind, _, model_type = source.partition(":")
    if kind == "transformers":
        from transformers import AutoConfig

        return type(AutoConfig.for_model(model_type))
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    return _CONFIG_REGISTRY[model_type]
