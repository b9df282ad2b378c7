"""Config-only model folders for GLM-5.3-Flash (target) and its DFlash2 drafter."""

from __future__ import annotations

import json
from pathlib import Path

TARGET_DIR = "glm53flash_target"
DRAFT_DIR = "glm53flash_dflash2"


def target_config(index_kpool: int = 4) -> dict:
    """The target's config.json, built with transformers' own class so field names are right."""
    from transformers import Glm5NextConfig, Glm5NextTextConfig

    text = Glm5NextTextConfig(
        vocab_size=154880, hidden_size=4096, intermediate_size=12288,
        moe_intermediate_size=2048, num_hidden_layers=45,
        num_attention_heads=64, num_key_value_heads=64,
        n_routed_experts=288, n_shared_experts=1, num_experts_per_tok=8,
        q_lora_rank=1536, kv_lora_rank=512,
        qk_nope_head_dim=256, qk_rope_head_dim=0, v_head_dim=256,
        index_topk=2048, index_n_heads=32, index_head_dim=128,
        # The published model uses 4; transformers' default is 16 (changes block size to 1024).
        index_kpool=index_kpool, index_kpool_always_select_tail=True,
        linear_head_dim=128, linear_num_heads=64, linear_conv_kernel_dim=4,
        hc_mult=4, hc_sinkhorn_iters=20, max_position_embeddings=1048576,
    ).to_dict()
    # Checkpoint extras that vLLM 0.33.0's glm5next code reads but transformers does not
    # declare. Guessed values; only mla_use_nope touches the KV path (it skips MLA rope).
    text.update(mla_use_nope=True, mhc=True, indexer_rope_interleave=True,
                num_nextn_predict_layers=1, topk_method="noaux_tc", scoring_func="sigmoid")
    top = Glm5NextConfig(text_config=text).to_dict()
    top.update(architectures=["Glm5NextForConditionalGeneration"], text_config=text,
               dtype="bfloat16")
    # FP8 block-quantized checkpoint; MLA/KDA are built unquantized, so no KV effect.
    top["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                  "activation_scheme": "dynamic",
                                  "weight_block_size": [128, 128]}
    return top


def drafter_config() -> dict:
    """The DFlash2 drafter's config.json: 5 non-causal sliding-window qwen3 layers."""
    n_layers = 5
    return {
        "architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "dtype": "bfloat16",
        "vocab_size": 154880, "hidden_size": 4096,
        "intermediate_size": 12288,  # assumed; no KV effect (only the weight estimate)
        "num_hidden_layers": n_layers, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
        "rms_norm_eps": 1e-6, "max_position_embeddings": 1048576,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        "attention_bias": False, "tie_word_embeddings": False,
        "layer_types": ["sliding_attention"] * n_layers, "sliding_window": 2048,
        "use_sliding_window": True, "max_window_layers": 0, "is_causal": False,
        "target_hidden_size": 4096, "block_size": 8,
        "dflash_config": {
            "block_size": 8, "conv_kernel_size": 2, "conv_group_size": 16,
            "selector_rank": 256, "selector_top_k": 16, "mask_token_id": 154856,
            "target_layer_ids": [5, 14, 24, 33, 42],
        },
    }


def write(root: Path, index_kpool: int = 4) -> tuple[dict, dict]:
    """Write both folders under root; return (target text config, drafter config)."""
    target, draft = target_config(index_kpool), drafter_config()
    for name, cfg in ((TARGET_DIR, target), (DRAFT_DIR, draft)):
        (Path(root) / name).mkdir(parents=True, exist_ok=True)
        (Path(root) / name / "config.json").write_text(json.dumps(cfg, indent=2))
    return target["text_config"], draft
