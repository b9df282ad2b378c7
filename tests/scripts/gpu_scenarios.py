"""The scenarios of `make gpu-check` and `make gpu-dry-run`: checkpoints written here, shapes H100/H200 kernels take.

Each scenario is one speculative config against a target; gpu_check.py runs it beside the same target without
speculation. Shapes follow the published checkpoints where a kernel cares (GLM-5.3-Flash: MLA latent 512 without
rope, indexer head 128, KDA head 128; Qwen3-Next: attention head 256, linear heads 128; Kimi-K3: MLA 512 + rope
64, KDA head 128) and are tiny elsewhere. Head counts are those of one TP8 rank of the published model.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu_constructed  # noqa: E402  (pure Python at import: the checkpoints are written by write())

LAYERS = 8
GLM_TEXT = dict(
    vocab_size=512, hidden_size=512, intermediate_size=1024, moe_intermediate_size=128, num_hidden_layers=LAYERS,
    num_attention_heads=8, num_key_value_heads=8, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
    n_group=1, topk_group=1, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=256, qk_rope_head_dim=0,
    qk_nope_head_dim=256, v_head_dim=256, hidden_act="silu", max_position_embeddings=65536, rms_norm_eps=1e-5,
    tie_word_embeddings=False, norm_topk_prob=True, mlp_layer_types=["dense"] + ["sparse"] * (LAYERS - 1),
    layer_types=["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(LAYERS)],
    indexer_types=["full"] * LAYERS, index_topk=2048, index_head_dim=128, index_n_heads=32, index_kpool=4,
    index_kpool_always_select_tail=True, linear_head_dim=128, linear_num_heads=8, linear_conv_kernel_dim=4,
    linear_lower_bound=-5.0, hc_mult=4, hc_eps=1e-6, hc_sinkhorn_iters=20, swiglu_limit=10.0,
    num_nextn_predict_layers=1, torch_dtype="bfloat16", pad_token_id=0, eos_token_id=3, mhc=True,
    mla_use_nope=True, indexer_rope_interleave=True, scoring_func="sigmoid", topk_method="noaux_tc")
# The pools A/B's target: one more KDA layer (7 against 2 MLA layers), so that the planner's last KDA group holds one
# state in a two-state block, as the published model's 34 KDA layers leave groups 70-79 % full: a KDA group to carve.
POOLS_TEXT = GLM_TEXT | dict(num_hidden_layers=LAYERS + 1, mlp_layer_types=["dense"] + ["sparse"] * LAYERS,
                             layer_types=GLM_TEXT["layer_types"] + ["linear_attention"],
                             indexer_types=["full"] * (LAYERS + 1))
GLM_VISION = dict(model_type="glm5_next_vision", depth=1, hidden_size=64, num_heads=2, intermediate_size=128,
                  out_hidden_size=512, projection_intermediate_size=128, patch_size=14, spatial_merge_size=2,
                  temporal_patch_size=2)
# Shaped like the published DFlash2 draft (candidate selector, non-causal sliding-window layers), 1 KV head.
DFLASH2 = dict(
    architectures=["DFlash2DraftModel"], model_type="qwen3", vocab_size=512, hidden_size=512, target_hidden_size=512,
    intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, head_dim=128,
    hidden_act="silu", max_position_embeddings=65536, rms_norm_eps=1e-6, tie_word_embeddings=False,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, attention_bias=False,
    layer_types=["sliding_attention"] * 2, sliding_window=512, use_sliding_window=True, max_window_layers=0,
    is_causal=False, torch_dtype="bfloat16", block_size=8,
    dflash_config={"block_size": 8, "conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 32,
                   "selector_top_k": 4, "mask_token_id": 4, "target_layer_ids": [1, 3, 6]})
QWEN3_NEXT = dict(
    architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", vocab_size=512, hidden_size=512,
    intermediate_size=1024, num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
    full_attention_interval=4, linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
    linear_num_key_heads=2, linear_num_value_heads=4, num_experts=8, num_experts_per_tok=2,
    moe_intermediate_size=128, shared_expert_intermediate_size=128, decoder_sparse_step=1, norm_topk_prob=True,
    max_position_embeddings=65536, rms_norm_eps=1e-6, tie_word_embeddings=False, torch_dtype="bfloat16",
    eos_token_id=3, rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25})
QWEN3_NEXT_DFLASH = dict(
    architectures=["DFlashDraftModel"], model_type="qwen3", vocab_size=512, hidden_size=512, target_hidden_size=512,
    intermediate_size=1024, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=1, head_dim=128,
    max_position_embeddings=65536, rms_norm_eps=1e-6, rope_theta=10000000.0, block_size=5,
    tie_word_embeddings=False, torch_dtype="bfloat16",
    dflash_config={"target_layer_ids": [1, 3, 5], "mask_token_id": 4})
KIMI_K3_TEXT = dict(
    architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", vocab_size=512, hidden_size=512,
    intermediate_size=1024, num_hidden_layers=LAYERS, num_attention_heads=8, num_key_value_heads=8, head_dim=128,
    hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=65536, q_lora_rank=None, kv_lora_rank=512,
    qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, mla_use_nope=True, num_experts=8,
    num_experts_per_token=2, num_shared_experts=1, moe_intermediate_size=128, first_k_dense_replace=1,
    moe_layer_freq=1, moe_renormalize=True, moe_router_activation_func="sigmoid", routed_scaling_factor=2.5,
    use_grouped_topk=True, num_expert_group=1, topk_group=1, tie_word_embeddings=False, torch_dtype="bfloat16",
    linear_attn_config={"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "head_dim": 128,
                        "num_heads": 8, "short_conv_kernel_size": 4},
    bos_token_id=2, eos_token_id=3)
K3_DSPARK = dict(
    architectures=["K3DSparkModel"], model_type="k3_dspark", vocab_size=512, hidden_size=512, target_hidden_size=512,
    intermediate_size=1024, num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=8, q_lora_rank=256,
    kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, hidden_act="silu",
    rms_norm_eps=1e-5, max_position_embeddings=65536, target_layer_ids=[1, 3, 5], num_target_layers=3,
    markov_rank=16, block_size=4, draft_vocab_size=512, mask_token_id=4, torch_dtype="bfloat16")

# Every engine: tokenizer shipped (the renderer needs one for multimodal wrappers), chunked prefill, CUDA graphs
# (captured up to 64 tokens: 8 requests x (1 + at most 7 drafts)), the lm_head in fp32 (vLLM 0.33.0's
# ModelConfig.head_dtype reads hf_overrides' head_dtype; LogitsProcessor computes the logits in it).
# Engines are small: up to PARALLEL of them share one GPU, each with its share of memory and a fixed KV pool
# (kv_cache_memory_bytes: no engine's plan depends on what the others hold while it profiles).
PARALLEL = 3
ENGINE = dict(load_format="dummy", dtype="bfloat16", max_model_len=32768, max_num_seqs=8,
              max_num_batched_tokens=2048, enable_chunked_prefill=True, gpu_memory_utilization=0.85 / PARALLEL,
              kv_cache_memory_bytes=8 << 30, seed=0, hf_overrides={"head_dtype": "float32"},
              compilation_config={"max_cudagraph_capture_size": 64})
NO_MM = {"limit_mm_per_prompt": {"image": 0, "video": 0}}
# Constructed weights (gpu_constructed.py): real checkpoints, tiny; the map they compute needs no fp32 head.
CONSTRUCTED_ENGINE = dict(load_format="auto", dtype="bfloat16", max_model_len=1024, max_num_seqs=8,
                          gpu_memory_utilization=0.08, kv_cache_memory_bytes=1 << 30, seed=0,
                          enable_prefix_caching=False,
                          compilation_config={"max_cudagraph_capture_size": 64})
CONSTRUCTED_K = gpu_constructed.K  # the drafters are built for this many drafts per step


@dataclass(frozen=True)
class Scenario:
    """One speculative config against one target (checkpoint folder names under the work root)."""

    name: str
    target: str
    speculative: dict
    engine: dict = field(default_factory=dict)
    packed: bool = False  # the fork must pack the draft's KV group here; gpu-check also runs it with packing off
    # The fork must carve KV pools per page size here (prefix caching on): shared-prefix prompts, and the same
    # engine again with VLLM_FORK_DISABLE_KV_PACKING=1 (docs/kv-pools.md).
    pools: bool = False
    # The fork's default (VLLM_FORK_KV_POOLS=auto) carves here once the start-up self-test passes on the GPU's own
    # attention kernels: the engine runs under auto, and again with VLLM_FORK_DISABLE_KV_PACKING=1.
    auto_pools: bool = False
    draft_kinds: tuple = ("attention",)
    speculator: str = ""  # the class Model Runner V2 must draft with (init_speculator's choice)
    constructed: bool = False  # gpu_constructed.py weights: exact tokens, acceptance floor
    prefix_ab: bool = False  # constructed, repeated prefixes: also run with prefix caching on, compare acceptance


def _glm(kind: str, mtp_layers: int = 1) -> str:
    return f"glm5_{kind}" + (f"_mtp{mtp_layers}" if mtp_layers > 1 else "")


def _glm_scenarios(kind: str, extra: dict, pools: bool = False) -> list[Scenario]:
    dflash2 = {"method": "dflash2", "model": "{root}/dflash2", "num_speculative_tokens": 7}
    d2 = "DFlash2Speculator"
    return [
        Scenario(f"glm5-{kind}-mtp1", _glm(kind), {"method": "mtp", "num_speculative_tokens": 1}, extra,
                 speculator="MTPSpeculator"),
        Scenario(f"glm5-{kind}-mtp3", _glm(kind, 3), {"method": "mtp", "num_speculative_tokens": 3}, extra,
                 speculator="MultiModuleMTPSpeculator"),
        Scenario(f"glm5-{kind}-dflash2-prefix-cache", _glm(kind) + ("_pools" if pools else ""), dflash2,
                 extra | {"enable_prefix_caching": True}, speculator=d2, pools=pools),
        Scenario(f"glm5-{kind}-dflash2-packed", _glm(kind), dflash2, extra | {"enable_prefix_caching": False},
                 packed=True, speculator=d2),
        Scenario(f"glm5-{kind}-dflash2-fp8kv", _glm(kind), dflash2,
                 extra | {"enable_prefix_caching": False, "kv_cache_dtype": "fp8"}, packed=True, speculator=d2),
        # The fork's RecoverSSM on GLM's KDA (docs/glm5.md): its start-up check on this GPU, then verify and commit
        # under CUDA graphs, mixed batches and prefix caching's align mode; the tokens must be the target's own.
        Scenario(f"glm5-{kind}-dflash2-replayssm", _glm(kind), dflash2,
                 extra | {"enable_prefix_caching": True, "use_replayssm": True}, speculator=d2),
    ]


def _constructed(name: str, method: str, draft: str | None, speculator: str, target: str = "constructed_llama",
                 **flags) -> Scenario:
    spec = {"method": method, "num_speculative_tokens": CONSTRUCTED_K} | ({"model": "{root}/" + draft} if draft else {})
    return Scenario(name, target, spec, speculator=speculator, constructed=True, **flags)


SCENARIOS: list[Scenario] = [
    *_glm_scenarios("text", {}, pools=True),  # the multimodal wrapper plans the same KV: one A/B is enough
    # The multimodal wrapper plans the same KV and runs the same kernels as the text model: only what goes through the
    # wrapper (MTP and DFlash2's hidden-state capture) is run again; 7 engines fewer than every text scenario again.
    *[s for s in _glm_scenarios("mm", NO_MM) if s.name in ("glm5-mm-mtp1", "glm5-mm-dflash2-prefix-cache")],
    Scenario("qwen3next-dflash", "qwen3_next", {"method": "dflash", "model": "{root}/qwen3_next_dflash",
                                                "num_speculative_tokens": 4}, speculator="DFlashSpeculator"),
    Scenario("kimik3-text-dspark", "kimi_k3_text", {"method": "dspark", "model": "{root}/k3_dspark",
                                                    "num_speculative_tokens": 3}, speculator="DSparkSpeculator"),
    Scenario("glm4-eagle3", "glm4", {"method": "eagle3", "model": "{root}/eagle3", "num_speculative_tokens": 3},
             {"load_format": "auto", "max_model_len": 1024}, speculator="EagleSpeculator"),
    # The CPU engine's KV pools pair (tests/test_cpu_e2e.py): the drafter's wide pages pad the target's, so the default
    # self-tests FlashAttention's kernels on a carved slot, then carves the target's groups (random weights wide
    # enough that a misread changes the tokens).
    Scenario("glm4-dflash-wide-window-auto", "glm4", {"method": "dflash", "model": "{root}/dflash_wide_window",
                                                      "num_speculative_tokens": 3},
             {"load_format": "auto", "max_model_len": 1024}, speculator="DFlashSpeculator", auto_pools=True),
    # Constructed weights: target and drafter compute the same map, so acceptance must reach the floor. Nothing
    # here is packed: beside the Llama target's pages stock already gives the drafters' window groups twice the
    # tokens per block, so the stride holds no padding (packing needs a block-outermost pool, as GLM's).
    _constructed("constructed-eagle3", "eagle3", "constructed_eagle3", "EagleSpeculator"),
    _constructed("constructed-eagle3-prefix-cache", "eagle3", "constructed_eagle3", "EagleSpeculator",
                 prefix_ab=True),
    _constructed("constructed-draft-model", "draft_model", "constructed_llama", "StandaloneARSpeculator"),
    _constructed("constructed-mtp", "mtp", None, "MTPSpeculator", target="constructed_mimo"),
    _constructed("constructed-dflash", "dflash", "constructed_dflash", "DFlashSpeculator"),
    _constructed("constructed-dflash2", "dflash2", "constructed_dflash2", "DFlash2Speculator"),
]
# The two startup blockers of the old GPU script, as scenarios the dry run must refuse.
BLOCKERS: list[Scenario] = [
    Scenario("blocker-mm-processor-without-tokenizer", "glm5_mm", {"method": "mtp", "num_speculative_tokens": 1},
             {"skip_tokenizer_init": True}),
    Scenario("blocker-indexer-head-32", "glm5_text_index32", {"method": "mtp", "num_speculative_tokens": 1}),
]
BY_NAME = {s.name: s for s in SCENARIOS + BLOCKERS}


def engine_kwargs(scenario: Scenario, root: Path) -> dict:
    """EngineArgs keyword arguments of the scenario's speculative engine."""
    speculative = {k: v.format(root=root) if isinstance(v, str) else v for k, v in scenario.speculative.items()}
    base = CONSTRUCTED_ENGINE if scenario.constructed else ENGINE
    return dict(base, model=str(root / scenario.target), **scenario.engine, speculative_config=speculative)


def _tiny_models():
    """The CPU tests' checkpoint builders (Glm4 + EAGLE3, the word-level tokenizer); imported late: torch."""
    sys.path.insert(0, str(HERE))
    import tiny_models

    return tiny_models


def _folder(root: Path, name: str, config: dict, tokenizer: bool = True) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "config.json").write_text(json.dumps(config, indent=1))
    if tokenizer:
        _tiny_models().tokenizer(root / name)


def write(root: Path) -> Path:
    """Write every checkpoint folder the scenarios name under root; return root."""
    root = Path(root)
    glm_text = dict(GLM_TEXT, model_type="glm5_next_text", architectures=["Glm5NextForCausalLM"])
    for layers in (1, 3):
        suffix = f"_mtp{layers}" if layers > 1 else ""
        text = dict(glm_text, num_nextn_predict_layers=layers)
        _folder(root, f"glm5_text{suffix}", text)
        _folder(root, f"glm5_mm{suffix}", dict(
            model_type="glm5_next", architectures=["Glm5NextForConditionalGeneration"], torch_dtype="bfloat16",
            text_config=dict(text, model_type="glm5_next_text"), vision_config=GLM_VISION,
            tie_word_embeddings=False))
    _folder(root, "glm5_text_index32", dict(glm_text, index_head_dim=32))
    _folder(root, "glm5_text_pools", POOLS_TEXT | {"model_type": "glm5_next_text",
                                                   "architectures": ["Glm5NextForCausalLM"]})
    _folder(root, "dflash2", DFLASH2, tokenizer=False)
    _folder(root, "qwen3_next", QWEN3_NEXT)
    _folder(root, "qwen3_next_dflash", QWEN3_NEXT_DFLASH, tokenizer=False)
    _folder(root, "kimi_k3_text", KIMI_K3_TEXT)
    _folder(root, "k3_dspark", K3_DSPARK, tokenizer=False)
    _tiny_models().glm4(root / "glm4")
    _tiny_models().eagle3(root / "eagle3")
    _tiny_models().dflash_wide_window(root / "dflash_wide_window")
    gpu_constructed.write(root)
    return root
