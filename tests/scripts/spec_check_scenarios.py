"""Config-only checkpoints for the `vllm spec-check` tests and benchmark: the reported deployments and the ways they go wrong.

write(root) -> {name: Scenario}. GLM-5.3-Flash and its DFlash2 drafter use the real dimensions (the KV
benchmark's model_configs); the other targets are small but complete configs of the real architectures.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "glm5_kv"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "tests" / "corpus"))

import model_configs  # noqa: E402  (GLM-5.3-Flash + DFlash2 at real dimensions)
from glm5_spec_probe import DRAFT as TINY_DFLASH_DRAFT  # noqa: E402
from glm5_spec_probe import TEXT as TINY_GLM_TEXT  # noqa: E402
from assemble import dflash_tensors, header_only  # noqa: E402  (z-lab's DFlash checkpoint layout)


# A config-only folder cannot show its tensors: the checkpoint-contents checks cannot tell (exit 1).
DRAFT_UNSEEN, MTP_UNSEEN = {"draft tensors": "cannot tell"}, {"MTP tensors": "cannot tell"}


@dataclass(frozen=True)
class Scenario:
    """One spec-check invocation and what it must answer: exit code and the status of named checks."""

    argv: list[str]
    code: int
    statuses: dict[str, str] = field(default_factory=dict)
    says: str = ""  # a phrase the report (or the bad-input message) must contain


# Small but complete configs of the other reported deployments' architectures (fields as their config classes require).
QWEN3_NEXT = dict(
    architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", vocab_size=151936, hidden_size=256,
    intermediate_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
    full_attention_interval=4, linear_conv_kernel_dim=4, linear_key_head_dim=32, linear_value_head_dim=32,
    linear_num_key_heads=8, linear_num_value_heads=16, num_experts=8, num_experts_per_tok=2,
    moe_intermediate_size=128, shared_expert_intermediate_size=128, decoder_sparse_step=1, norm_topk_prob=True,
    max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False, torch_dtype="bfloat16",
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25})
QWEN3_NEXT_DFLASH = dict(
    architectures=["DFlashDraftModel"], model_type="qwen3", vocab_size=151936, hidden_size=256,
    target_hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=8,
    num_key_value_heads=2, head_dim=64, max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000000.0,
    block_size=5, tie_word_embeddings=False, torch_dtype="bfloat16",
    dflash_config={"target_layer_ids": [1, 3, 5], "mask_token_id": 151669})
KIMI_K3_TEXT = dict(
    architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", vocab_size=163840, hidden_size=256,
    intermediate_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8, head_dim=32,
    hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=4096, q_lora_rank=None, kv_lora_rank=64,
    qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, mla_use_nope=True, num_experts=8,
    num_experts_per_token=2, num_shared_experts=1, moe_intermediate_size=128, first_k_dense_replace=1,
    moe_layer_freq=1, moe_renormalize=True, moe_router_activation_func="sigmoid", routed_scaling_factor=2.5,
    use_grouped_topk=True, num_expert_group=1, topk_group=1, tie_word_embeddings=False, torch_dtype="bfloat16",
    linear_attn_config={"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "head_dim": 32,
                        "num_heads": 8, "short_conv_kernel_size": 4},
    bos_token_id=163584, eos_token_id=163585)
K3_DSPARK = dict(
    architectures=["K3DSparkModel"], model_type="k3_dspark", vocab_size=163840, hidden_size=256,
    target_hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=8,
    num_key_value_heads=8, q_lora_rank=64, kv_lora_rank=64, qk_nope_head_dim=128, qk_rope_head_dim=64,
    v_head_dim=128, hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=4096,
    target_layer_ids=[1, 3, 5], num_target_layers=3, markov_rank=16, block_size=4, draft_vocab_size=163840,
    torch_dtype="bfloat16")


# A small Llama and EAGLE3 heads for it: both formats (EAGLE's own, and speculators' with its verifier).
TINY_LLAMA = dict(
    architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512, hidden_size=256, intermediate_size=512,
    num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8, head_dim=32, max_position_embeddings=4096,
    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, torch_dtype="bfloat16")
EAGLE3_HEAD = dict(
    architectures=["LlamaForCausalLMEagle3"], model_type="llama", vocab_size=512, draft_vocab_size=512,
    hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=8,
    head_dim=32, max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
    hidden_act="silu", torch_dtype="bfloat16")
# A small DeepSeek-V3 (MLA + MoE): its decoder does not relay aux states across PP stages.
TINY_DEEPSEEK_V3 = dict(
    architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", vocab_size=512, hidden_size=256,
    intermediate_size=512, moe_intermediate_size=128, num_hidden_layers=4, num_attention_heads=8,
    num_key_value_heads=8, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
    moe_layer_freq=1, n_group=1, topk_group=1, kv_lora_rank=64, q_lora_rank=96, qk_nope_head_dim=32,
    qk_rope_head_dim=16, v_head_dim=32, routed_scaling_factor=2.5, scoring_func="sigmoid", topk_method="noaux_tc",
    norm_topk_prob=True, num_nextn_predict_layers=1, max_position_embeddings=4096, rms_norm_eps=1e-6,
    rope_theta=10000, tie_word_embeddings=False, torch_dtype="bfloat16")


def _speculators(verifier: str) -> dict:
    """EAGLE3_HEAD in the speculators format, pointing at its verifier (as serve's override reads it)."""
    layer = {k: v for k, v in EAGLE3_HEAD.items() if k != "architectures"}
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": 512,
            "norm_before_residual": True, "transformer_layer_config": layer, "torch_dtype": "bfloat16",
            "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                   "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]}}}


def _folder(root: Path, name: str, config: dict | str) -> str:
    (root / name).mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (root / name / "config.json").write_text(text)
    return str(root / name)


def _spec(method: str, model: str | None = None, tokens: int = 3) -> list[str]:
    config = {"method": method, "num_speculative_tokens": tokens} | ({"model": model} if model else {})
    return ["--speculative-config", json.dumps(config)]


def _dflash_draft(arch: str, layer_ids: list[int], **extra) -> dict:
    return dict(TINY_DFLASH_DRAFT, architectures=[arch], **extra,
                dflash_config=dict(TINY_DFLASH_DRAFT["dflash_config"], target_layer_ids=layer_ids))


def write(root: Path) -> dict[str, Scenario]:
    """Write every checkpoint under root and return the scenarios that use them."""
    root = Path(root)
    model_configs.write(root)
    text_only = dict(model_configs.target_config()["text_config"], model_type="glm5_next_text",
                     architectures=["Glm5NextForCausalLM"], dtype="bfloat16")
    _folder(root, "glm53flash_text_only_bf16", text_only)  # 313B parameters in bf16: 78 GB per H100 at TP8
    quantized = dict(text_only, quantization_config=model_configs.target_config()["quantization_config"])
    _folder(root, "glm53flash_text_only", quantized)  # the published format: fp8 blocks
    _folder(root, "tiny_llama", TINY_LLAMA)
    _folder(root, "EAGLE3-tiny-llama", EAGLE3_HEAD)
    _folder(root, "eagle3_head_4_heads", dict(EAGLE3_HEAD, num_attention_heads=4, num_key_value_heads=4, head_dim=64))
    _folder(root, "eagle3_nested_ids", dict(EAGLE3_HEAD, eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 4]}))
    _folder(root, "speculators_eagle3", _speculators(str(root / "tiny_llama")))
    _folder(root, "tiny_deepseek_v3", TINY_DEEPSEEK_V3)
    _folder(root, "tiny_deepseek_v3_no_mtp", dict(TINY_DEEPSEEK_V3, num_nextn_predict_layers=0))
    _folder(root, "tiny_glm5", dict(TINY_GLM_TEXT, model_type="glm5_next", architectures=["Glm5NextForCausalLM"]))
    _folder(root, "dflash1_draft", _dflash_draft("DFlashDraftModel", [0, 2]))
    _folder(root, "dflash2_too_deep", _dflash_draft("DFlash2DraftModel", [0, 2, 9]))
    _folder(root, "dflash2_wrong_hidden", _dflash_draft("DFlash2DraftModel", [0, 2], target_hidden_size=256))
    _folder(root, "mamba", {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "vocab_size": 512,
                            "hidden_size": 128, "state_size": 16, "num_hidden_layers": 4, "expand": 2,
                            "conv_kernel": 4, "layer_norm_epsilon": 1e-5, "torch_dtype": "bfloat16"})
    _folder(root, "unknown_arch", {"architectures": ["Glm6ForCausalLM"], "model_type": "llama"})
    _folder(root, "broken_json", '{"architectures": ["LlamaForCausalLM"],')
    for name, config in (("qwen3_next", QWEN3_NEXT), ("qwen3_next_dflash", QWEN3_NEXT_DFLASH),
                         ("kimi_k3_text", KIMI_K3_TEXT), ("k3_dspark", K3_DSPARK)):
        _folder(root, name, config)
    # The Qwen3-Next DFlash draft with its tensors (a safetensors header in z-lab's layout), and two broken ones.
    published = dflash_tensors(QWEN3_NEXT_DFLASH)
    for name, tensors in (("qwen3_next_dflash_weights", published),
                          ("qwen3_next_dflash_mask_hidden", {**published, "mask_hidden": [256]}),
                          ("qwen3_next_dflash_without_fc", {k: v for k, v in published.items() if k != "fc.weight"})):
        header_only(Path(_folder(root, name, QWEN3_NEXT_DFLASH)) / "model.safetensors", tensors, "BF16")
    return scenarios(root)


def scenarios(root: Path) -> dict[str, Scenario]:
    """The scenarios over the folders write(root) creates (paths only: cheap enough for test collection)."""
    root = Path(root)
    glm, dflash2 = str(root / model_configs.TARGET_DIR), str(root / model_configs.DRAFT_DIR)
    glm_text, tiny, dflash1, too_deep, wide, mamba, unknown, broken, qwen, qwen_dflash, kimi, dspark = (
        str(root / name) for name in (
            "glm53flash_text_only", "tiny_glm5", "dflash1_draft", "dflash2_too_deep", "dflash2_wrong_hidden",
            "mamba", "unknown_arch", "broken_json", "qwen3_next", "qwen3_next_dflash", "kimi_k3_text", "k3_dspark"))
    tp8 = ["--tensor-parallel-size", "8", "--enable-expert-parallel"]
    llama, eagle3, deepseek, deepseek_no_mtp = (str(root / name) for name in (
        "tiny_llama", "EAGLE3-tiny-llama", "tiny_deepseek_v3", "tiny_deepseek_v3_no_mtp"))
    return {
        "glm5_dflash2_tp8": Scenario(
            [glm, *_spec("dflash", dflash2, 7), *tp8], 1,
            {**DRAFT_UNSEEN, "speculator": "pass", "EAGLE3 contract": "pass", "aux layers": "pass", "hidden size": "pass",
             "KV cache plan": "info"},  # this host has no H100: the plan needs its attention backends
            "DFlash2Speculator"),
        "glm5_dflash2_alias": Scenario([glm, *_spec("dflash2", dflash2, 7), *tp8], 1,
                                       {**DRAFT_UNSEEN, "speculator": "pass", "draft class": "pass"},
                                       "method 'dflash2' runs as 'dflash'"),
        "glm5_dense_draft_drops_ep": Scenario([glm, *_spec("dflash", dflash2, 7), *tp8], 1,
                                              {**DRAFT_UNSEEN, "draft parallelism": "info"}, "target EP not inherited"),
        "glm5_text_only_mtp": Scenario([glm_text, *_spec("mtp", None, 1), *tp8], 1,
                                       {**MTP_UNSEEN, "speculator": "pass"},
                                       "draft Glm5NextMTPModel"),
        "qwen3_next_dflash": Scenario([qwen, *_spec("dflash", qwen_dflash, 4), "--tensor-parallel-size", "8"], 1,
                                      {**DRAFT_UNSEEN, "draft class": "pass", "EAGLE3 contract": "pass", "aux layers": "pass"}, "DFlashSpeculator"),
        "draft_checkpoint_fits_its_class": Scenario(
            [qwen, *_spec("dflash", str(root / "qwen3_next_dflash_weights"), 4), "--tensor-parallel-size", "8"], 0,
            {"draft class": "pass", "draft tensors": "info"}, "embed_tokens and lm_head from the target"),
        # DFlash's load_weights asserts that a checkpoint ships no mask_hidden weight
        "draft_checkpoint_with_a_tensor_its_class_refuses": Scenario(
            [qwen, *_spec("dflash", str(root / "qwen3_next_dflash_mask_hidden"), 4), "--tensor-parallel-size", "8"],
            1, {"draft tensors": "fail"}, "mask_hidden"),
        "draft_checkpoint_without_its_fc": Scenario(
            [qwen, *_spec("dflash", str(root / "qwen3_next_dflash_without_fc"), 4), "--tensor-parallel-size", "8"],
            0, {"draft tensors": "warn"}, "model.fc.weight"),
        "kimi_k3_text_dspark_cuda": Scenario([kimi, *_spec("dspark", dspark), "--gpu", "h100"], 1,
                                             {**DRAFT_UNSEEN, "draft class": "pass", "EAGLE3 contract": "pass"}, "kimi_k3.nvidia.model.KimiLinearForCausalLM"),
        "kimi_k3_text_dspark_rocm": Scenario([kimi, *_spec("dspark", dspark), "--gpu", "mi300x"], 1,
                                             {**DRAFT_UNSEEN, "draft class": "info", "EAGLE3 contract": "pass"}, "kimi_k3.amd.linear.KimiLinearForCausalLM"),
        "dflash2_alias_with_dflash1_draft": Scenario([tiny, *_spec("dflash2", dflash1)], 1,
                                                     {"speculative config": "fail"}, "use method 'dflash'"),
        "layer_ids_beyond_depth": Scenario([tiny, *_spec("dflash", too_deep)], 1, {"aux layers": "fail"},
                                           "outside the target's 4 layers"),
        "draft_for_another_hidden_size": Scenario([tiny, *_spec("dflash", wide)], 1, {"hidden size": "fail"},
                                                  "target hidden size 256"),
        "pp_without_aux_relay": Scenario([tiny, *_spec("dflash", dflash1), "--pipeline-parallel-size", "2"], 1,
                                         {"pipeline parallel": "fail"}, "pipeline parallelism"),
        "unsupported_target": Scenario([mamba, *_spec("dflash", dflash1)], 1, {"EAGLE3 contract": "fail"},
                                       "serve this architecture without --speculative-config"),
        "heads_not_divisible": Scenario([tiny, *_spec("dflash", dflash1), "--tensor-parallel-size", "8"], 1,
                                        {"target parallelism": "fail"}, "divisible"),
        "unknown_architecture": Scenario([unknown, *_spec("mtp", None, 1)], 1, {"target architecture": "fail"},
                                         "Glm6ForCausalLM is not a registered architecture"),
        # memory on a GPU-less host
        "weights_do_not_fit": Scenario([str(root / "glm53flash_text_only_bf16"), *_spec("mtp", None, 1), *tp8], 1,
                                       {"weights fit": "fail"}, "the weights alone do not fit"),
        # DeepSeek-V3's decoder (resolved through the outer class: the audit lists no holder) has no relay
        "deepseek_v3_eagle3_pp2": Scenario([deepseek, *_spec("eagle3", eagle3), "--pipeline-parallel-size", "2"], 1,
                                           {"pipeline parallel": "fail"}, "DeepseekV2Model"),
        # an EAGLE3 draft runs on the target's TP group, whatever draft_tensor_parallel_size says
        "draft_heads_vs_target_tp": Scenario(
            [llama, "--speculative-config", json.dumps({"method": "eagle3", "model": str(root / "eagle3_head_4_heads"),
                                                        "num_speculative_tokens": 3,
                                                        "draft_tensor_parallel_size": 1}),
             "--tensor-parallel-size", "8"], 1, {"draft tensor parallel": "fail"}, "the draft's 4 attention heads"),
        # serve's top-level speculative flags
        "serve_spec_flags": Scenario([llama, "--spec-method", "eagle3", "--spec-model", eagle3, "--spec-tokens", "3"],
                                     1, {**DRAFT_UNSEEN, "speculator": "pass"}, "EagleSpeculator"),
        "serve_spec_flag_twice": Scenario([llama, *_spec("eagle3", eagle3), "--spec-method", "eagle3"], 2, {},
                                          "mutually exclusive"),
        # a draft given as its config.json keeps its folder's name, which vLLM reads for the method
        "draft_config_file_keeps_method": Scenario(
            [llama, "--speculative-config", json.dumps({"model": eagle3 + "/config.json",
                                                        "num_speculative_tokens": 3})],
            1, {**DRAFT_UNSEEN, "speculator": "pass"}, "EagleSpeculator"),
        # dflash2 with an EAGLE3 head: one line, and the method that fits the head
        "dflash2_with_eagle3_head": Scenario([llama, *_spec("dflash2", eagle3)], 1, {"speculative config": "fail"},
                                             "use method 'eagle3'"),
        # mtp on a checkpoint without MTP layers; layer ids only under eagle_config (SpecForge's place, in
        # SGLang's numbering: vLLM does not read them, and two ids against a default of three fail)
        "mtp_without_mtp_layers": Scenario([deepseek_no_mtp, *_spec("mtp", None, 1)], 1,
                                           {"speculative config": "fail"}, "num_nextn_predict_layers: 0"),
        "eagle_config_layer_ids": Scenario([llama, *_spec("eagle3", str(root / "eagle3_nested_ids"))], 1,
                                           {**DRAFT_UNSEEN, "aux layers": "fail"}, "[2, 5]"),
        # a speculators checkpoint as MODEL runs its verifier with itself as the draft
        "speculators_checkpoint_as_model": Scenario([str(root / "speculators_eagle3")], 1,
                                                    {**DRAFT_UNSEEN, "speculators checkpoint": "info",
                                                     "speculator": "pass", "draft class": "pass"},
                                                    "EagleSpeculator"),
        # what only the full engine config refuses is found (one construction for every check)
        "engine_config_refusal": Scenario([llama, *_spec("eagle3", eagle3), "--max-num-seqs", "0"], 1,
                                          {"engine config": "fail"}, ""),
        "missing_folder": Scenario([str(root / "nowhere"), *_spec("mtp")], 2, {}, "is not a folder"),
        "malformed_config_json": Scenario([broken, *_spec("mtp")], 2, {}, "is not valid JSON"),
        "no_speculative_config": Scenario([glm], 2, {}, "--speculative-config: required"),
        "malformed_speculative_json": Scenario([glm, "--speculative-config", '{"method": "mtp"'], 2, {},
                                               "--speculative-config"),
        "speculative_config_without_method": Scenario([glm, "--speculative-config", '{"num_speculative_tokens": 3}'],
                                                      2, {}, "give 'method'"),
        "unknown_gpu": Scenario([glm, *_spec("mtp"), "--gpu", "h300"], 2, {}, "--gpu"),
    }


if __name__ == "__main__":
    for name, scenario in write(Path(sys.argv[1])).items():
        print(name, json.dumps(scenario.argv))
