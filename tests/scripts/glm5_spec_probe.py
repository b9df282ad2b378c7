"""GLM-5.3-Flash (glm5_next) speculative configs on the CPU, reported as JSON: MTP and the dflash2 alias.

Usage: python glm5_spec_probe.py OUT_JSON
Writes tiny config-only checkpoints (no weights) in three shapes (nested multimodal, flat glm5_next,
text-only glm5_next_text), builds vLLM's engine config for each case and reports what the draft became.
CPU stand-ins, none touching the behaviour under test: VLLM_TARGET_DEVICE=cpu (device string), prefix caching
off (the CPU platform turns it off for MLA after the hybrid hook set mamba_block_size), Triton taken as present
(tests/scripts/cpu_platform.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_platform  # noqa: E402

# The CPU stand-ins (see above) are set when this runs as a script, before anything imports vllm: other scripts
# and tests import its configs, and must not inherit them (the GPU script, the CPU e2e engines).
CPU_STAND_INS = {"VLLM_TARGET_DEVICE": "cpu"}

TEXT = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, moe_intermediate_size=64, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
    num_experts_per_tok=2, n_group=1, topk_group=1, routed_scaling_factor=2.5, kv_lora_rank=64,
    q_lora_rank=96, qk_rope_head_dim=0, qk_nope_head_dim=32, v_head_dim=32, hidden_act="silu",
    max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False, norm_topk_prob=True,
    mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
    layer_types=["linear_attention"] * 3 + ["indexed_attention"], indexer_types=["full"] * 4,
    index_topk=256, index_head_dim=32, index_n_heads=2, index_kpool=4, index_kpool_always_select_tail=True,
    linear_head_dim=32, linear_num_heads=4, linear_conv_kernel_dim=4, linear_lower_bound=-5.0, hc_mult=4,
    hc_eps=1e-6, hc_sinkhorn_iters=20, swiglu_limit=10.0, num_nextn_predict_layers=1, torch_dtype="bfloat16",
    pad_token_id=0, eos_token_id=1, mhc=True, mla_use_nope=True, indexer_rope_interleave=False,
    scoring_func="sigmoid", topk_method="noaux_tc")
VISION = dict(model_type="glm5_next_vision", depth=1, hidden_size=64, num_heads=2, intermediate_size=128,
              out_hidden_size=128, projection_intermediate_size=128, patch_size=14, spatial_merge_size=2,
              temporal_patch_size=2)
DRAFT = dict(model_type="qwen3", vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096,
             rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False, torch_dtype="bfloat16",
             block_size=8, dflash_config={"target_layer_ids": [0, 2], "mask_token_id": 3,
                                          "conv_kernel_size": 4, "conv_group_size": 8})


def _write(root: Path, name: str, config: dict) -> str:
    (root / name).mkdir(parents=True)
    (root / name / "config.json").write_text(json.dumps(config))
    return str(root / name)


def checkpoints(root: Path) -> dict[str, str]:
    two = dict(TEXT, num_nextn_predict_layers=2)
    nested = lambda text: dict(model_type="glm5_next", architectures=["Glm5NextForConditionalGeneration"],  # noqa: E731
                               text_config=dict(text, model_type="glm5_next_text"), vision_config=VISION,
                               torch_dtype="bfloat16", tie_word_embeddings=False)
    return {
        "nested": _write(root, "nested", nested(TEXT)),
        "nested_mtp2": _write(root, "nested_mtp2", nested(two)),
        "flat": _write(root, "flat", dict(TEXT, model_type="glm5_next", architectures=["Glm5NextForCausalLM"])),
        "text_only": _write(root, "text_only", dict(TEXT, model_type="glm5_next_text",
                                                     architectures=["Glm5NextForCausalLM"])),
        "dflash2_draft": _write(root, "dflash2_draft", dict(DRAFT, architectures=["DFlash2DraftModel"])),
        "dflash_draft": _write(root, "dflash_draft", dict(DRAFT, architectures=["DFlashDraftModel"])),
    }


CASES = {  # name: (target, speculative config with {draft} placeholders)
    "mtp_text_only": ("text_only", {"method": "mtp", "num_speculative_tokens": 1}),
    "mtp_flat": ("flat", {"method": "mtp", "num_speculative_tokens": 1}),
    "mtp_nested_two_layers": ("nested_mtp2", {"method": "mtp", "num_speculative_tokens": 2}),
    "dflash2_alias": ("nested", {"method": "dflash2", "model": "{dflash2_draft}", "num_speculative_tokens": 7}),
    "dflash2_alias_wrong_draft": ("nested", {"method": "dflash2", "model": "{dflash_draft}",
                                             "num_speculative_tokens": 7}),
    "dflash_with_dflash2_draft": ("nested", {"method": "dflash", "model": "{dflash2_draft}",
                                             "num_speculative_tokens": 7}),
}


def engine_config(paths: dict[str, str], target: str, speculative: dict):
    from vllm.engine.arg_utils import EngineArgs

    speculative = {k: v.format(**paths) if isinstance(v, str) else v for k, v in speculative.items()}
    args = EngineArgs(model=paths[target], skip_tokenizer_init=True, max_model_len=1024, dtype="bfloat16",
                      enable_prefix_caching=False, max_num_batched_tokens=1024, speculative_config=speculative)
    with cpu_platform.without_triton_cpu():
        return args.create_engine_config()


def describe(config) -> dict:
    spec = config.speculative_config
    draft = spec.draft_model_config
    return {"ok": True, "method": spec.method, "draft_model_type": draft.hf_config.model_type,
            "draft_architectures": list(draft.architectures), "draft_use_mla": bool(draft.use_mla),
            "multi_module_mtp": bool(spec.use_multi_module_mtp()) if spec.method == "mtp" else None}


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:  # config-only checkpoints, gone with the probe
        _probe_all(checkpoints(Path(scratch)), out)


def _probe_all(paths, out: Path) -> None:
    results = {}
    for name, (target, speculative) in CASES.items():
        try:
            results[name] = describe(engine_config(paths, target, speculative))
        except Exception as exc:  # noqa: BLE001 - the validation error is the result
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    for name, value in CPU_STAND_INS.items():
        os.environ.setdefault(name, value)
    main(Path(sys.argv[1]))
