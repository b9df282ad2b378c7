"""The weights-fit check's parameter counter against published totals of real checkpoints (tests/corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm._fork.spec_check import params, weights
from vllm._fork.spec_check.gpus import GIB, GPUS

CONFIGS = Path(__file__).parent / "corpus" / "configs"


def config(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


# Published totals (sources in tests/corpus/SOURCES.md); the counter leaves out norms and biases.
@pytest.mark.parametrize("name, published", [
    ("DeepSeek-V3", 671e9),     # MLA + 256 routed experts + 1 shared, 3 dense layers (MTP layer not included)
    ("gpt-oss-120b", 117e9),    # 128 experts, alternating sliding/full attention
    ("Llama-3.1-8B", 8e9),
    ("Llama-3.1-70B", 70e9),
    ("Qwen3-8B", 8e9),
    ("Qwen3-30B-A3B", 30e9),
    ("Qwen3-Coder-Next", 79_674_391_296),  # hybrid linear attention, 512 experts (published count, SOURCES.md)
    ("GLM-5", 744e9),           # MLA + DSA indexer, 256 experts, 3 dense layers ("744B" in the GLM-5 README)
    ("Llama-4-Maverick-17B-128E", 400e9),  # 128 experts on every other layer + vision tower ("400B total")
])
def test_parameter_count_matches_the_published_total(name, published):
    total = params.count(config(name)).total
    assert abs(total - published) / published < 0.03, f"{name}: {total / 1e9:.2f}B vs {published / 1e9:.0f}B"


def test_mtp_layers_add_one_moe_layer_each():
    """DeepSeek-V3's MTP module: ~11.5B unique parameters (tt-metal README_WEIGHTS.md) besides the shared head."""
    extra = params.mtp_layers_params(config("DeepSeek-V3"), 1).total
    assert abs(extra - 11.5e9) / 11.5e9 < 0.05, extra / 1e9


@pytest.mark.parametrize("quantization, linear_bytes", [
    (None, 2), ({"quant_method": "fp8", "weight_block_size": [128, 128]}, 1 + 4 / 128 ** 2),
    ({"quant_method": "mxfp4"}, 2), ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 0.5 + 2.5 / 128),
])
def test_quantization_formats_set_bytes_per_parameter(quantization, linear_bytes):
    found = weights.quantization({"quantization_config": quantization} if quantization else {}, 2)
    assert found.linear == pytest.approx(linear_bytes) and found.rest == 2
    assert found.experts == pytest.approx(0.5 + 1 / 32 if quantization == {"quant_method": "mxfp4"} else linear_bytes)


def test_an_unknown_quantization_cannot_be_sized():
    with pytest.raises(weights.CannotTell, match="not sized"):
        weights.quantization({"quantization_config": {"quant_method": "something-new"}}, 2)


def test_bytes_per_rank_split_experts_by_ep_and_layers_by_pp():
    counted = params.count(config("DeepSeek-V3"))
    bf16 = weights.Quant(2, 2, 2, "bf16")
    tp8 = weights.bytes_per_rank(counted, bf16, 8, 1, 8)
    assert 150 * GIB < tp8 < 165 * GIB  # 671B x 2 bytes / 8, plus the replicated MLA down-projections
    assert weights.bytes_per_rank(counted, bf16, 8, 2, 8) < 0.55 * tp8  # two stages, each with half the layers


@pytest.mark.parametrize("weights_gib, kv_gib, status", [(60, 5, "pass"), (80, 0, "fail"), (70, 5, "fail"),
                                                          (67, 5, "cannot tell")])
def test_fit_against_memory_times_utilization(weights_gib, kv_gib, status):
    found, _ = weights.fit(GPUS["h100"], 0.92, None, weights_gib * GIB, kv_gib * GIB)
    assert found == status


def test_gemma3_sliding_window_pattern_keeps_five_of_six_layers_at_their_window():
    """Gemma-3 states `sliding_window_pattern: 6` (no layer_types): 8 of 48 layers are global, 40 hold 1024 tokens."""
    gemma = config("gemma-3-12b")
    assert params.layer_kinds(params._text(gemma)).count("full") == 8
    per_token = weights.kv_bytes_per_token(gemma, 1, 2, 131072)
    layer = 2 * 8 * 256 * 2  # K and V, 8 KV heads of 256, bf16
    assert per_token == pytest.approx(layer * (8 + 40 * 1024 / 131072))


def test_llama4_chunked_layers_keep_one_chunk_of_kv():
    """Maverick's RoPE layers attend within 8192-token chunks (ChunkedLocalAttentionSpec): 12 of 48 are global."""
    from transformers import Llama4Config

    raw = config("Llama-4-Maverick-17B-128E")
    maverick = weights._with_defaults(raw, Llama4Config.from_dict(raw))  # as finding() sees it
    assert params.layer_kinds(params._text(maverick)).count("full") == 12
    tokens = 1_048_576
    per_token = weights.kv_bytes_per_token(maverick, 8, 2, tokens)
    layer = 2 * 1 * 128 * 2  # K and V, one of 8 KV heads per rank at TP8, 128 wide, bf16
    assert per_token == pytest.approx(layer * (12 + 36 * 8192 / tokens))


def test_each_pipeline_stage_holds_the_kv_of_its_own_layers():
    """GLM-5's 78 MLA layers at PP2: vLLM's get_pp_indices gives each stage 39, so the fullest rank holds half."""
    glm5 = config("GLM-5")
    whole = weights.kv_bytes_per_token(glm5, 8, 2, 202752)
    assert whole == (512 + 64) * 2 * 78  # MLA latent + rope key per layer, bf16, not split by TP
    assert weights.kv_bytes_per_token(glm5, 8, 2, 202752, pp=2) == whole / 2
    assert weights.kv_bytes_per_token(glm5, 8, 2, 202752, pp=4) == (512 + 64) * 2 * 20  # 20 + 19 + 20 + 19


# config.json fields of two checkpoints that name their sizes their own way. GPT-2 small (openai-community/gpt2):
# the GPT2Config quoted in spencerbraun/editable_nlp src/config.py, 124M parameters (minGPT's table). Falcon-7B
# (tiiuae/falcon-7b): the module shapes printed in kimborgen/falcon-llm README.md (query_key_value 4544 -> 4672, i.e.
# one shared KV head; MLP 18176; vocab 65024; 32 layers), "7B parameters" in its model card.
GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024,
        "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None}
FALCON_7B = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "vocab_size": 65024, "hidden_size": 4544,
             "num_hidden_layers": 32, "num_attention_heads": 71, "multi_query": True,
             "new_decoder_architecture": False, "parallel_attn": True}


@pytest.mark.parametrize("raw, config_class, published", [
    (GPT2, "GPT2Config", 124e6),  # n_embd/n_layer/n_head, MLP of n_inner (null: 4 x width), two matrices
    (FALCON_7B, "FalconConfig", 6.92e9),  # one KV head (multi_query), MLP 4 x width, two matrices
], ids=["gpt2", "falcon-7b"])
def test_configs_with_their_own_size_names_are_counted(raw, config_class, published):
    import transformers

    resolved = getattr(transformers, config_class)(**{k: v for k, v in raw.items() if k != "architectures"})
    total = params.count(weights._with_defaults(raw, resolved)).total
    assert abs(total - published) / published < 0.03, f"{total / 1e9:.3f}B vs {published / 1e9:.3f}B"


@pytest.mark.parametrize("name, published, formula_error", [
    ("Nemotron-H-8B", 8e9, "linear_num_key_heads"),  # transformers calls its Mamba-2 layers linear_attention
    ("BLOOM-176B", 176e9, "intermediate_size"),       # fused query_key_value, 4h MLP without the field
])
def test_the_model_class_on_meta_counts_what_the_family_formulas_cannot(name, published, formula_error):
    """Where params.py's formulas raise, the transformers class built on the meta device gives the count."""
    import transformers

    from vllm._fork.spec_check import meta_params

    raw = config(name)
    resolved = transformers.AutoConfig.for_model(raw["model_type"], **{k: v for k, v in raw.items()
                                                                      if k not in ("model_type", "architectures")})
    with pytest.raises(KeyError, match=formula_error):
        params.count(weights._with_defaults(raw, resolved))
    counted = meta_params.count(raw)
    assert abs(counted.total - published) / published < 0.03, f"{name}: {counted.total / 1e9:.2f}B"
    assert counted.embed == resolved.vocab_size * resolved.hidden_size and counted.experts == 0


def test_glm53_flash_linear_layers_are_the_ones_its_vllm_class_builds_as_kda():
    """GLM-5.3-Flash carries a 0-based kda_layers beside layer_types; its vLLM class reads layer_types."""
    from transformers import AutoConfig

    from vllm.models.glm5next.common.model import _is_kda_layer

    text = AutoConfig.from_pretrained(CONFIGS / "GLM-5.3-Flash").text_config
    kinds = params.layer_kinds(config("GLM-5.3-Flash")["text_config"])
    assert [kind == "linear" for kind in kinds] == [_is_kda_layer(text, i) for i in range(text.num_hidden_layers)]
    assert kinds.count("linear") == 34


def test_kimi_linear_layers_are_the_ones_its_vllm_config_calls_kda():
    """Kimi's kda_layers is 1-based: vLLM's KimiLinearConfig.is_kda_layer is the reference."""
    from vllm.transformers_utils.configs.kimi_linear import KimiLinearConfig

    kda = {"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "num_heads": 4, "head_dim": 16,
           "short_conv_kernel_size": 4}
    reference = KimiLinearConfig(num_hidden_layers=8, linear_attn_config=kda)
    kinds = params.layer_kinds(reference.to_dict())
    assert [kind == "linear" for kind in kinds] == [reference.is_kda_layer(i) for i in range(8)]
