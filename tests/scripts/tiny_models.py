"""Tiny random checkpoints for the CPU end-to-end tests, built locally (no hub): targets and drafters.

Usage: python tiny_models.py OUT_DIR [BUILDER ...]  ->  OUT_DIR/<builder> for the builders named (default: all)
Shapes: head_dim 32 (the CPU attention backend's minimum) and 8 target layers (EAGLE3's default aux
layers (2, L//2, L-3) must be three distinct layers; L = 6 collapses two of them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS, MAX_POS = 256, 128, 4, 2, 32, 256, 8, 1024
PAD, UNK, BOS, EOS, MASK = range(5)
AUDIO, AUDIO_BOS, AUDIO_EOS = 252, 253, 254
DFLASH_LAYER_IDS = [1, 3, 4]

TEXT = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS, max_position_embeddings=MAX_POS, rms_norm_eps=1e-6,
            bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, tie_word_embeddings=False,
            initializer_range=0.2)  # wide init: greedy argmaxes are not near-ties


def tokenizer(out: Path, extra: dict[int, str] | None = None):
    """A word-level tokenizer: ids 0-4 special, the rest words w<id> (or the given special tokens)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    extra = extra or {}
    special = ["<pad>", "<unk>", "<bos>", "<eos>", "<mask>"]
    vocab = {t: i for i, t in enumerate(special)} | {extra.get(i, f"w{i}"): i for i in range(5, VOCAB)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer, core.decoder = pre_tokenizers.WhitespaceSplit(), decoders.WordPiece(prefix="##")
    core.add_special_tokens([AddedToken(t, special=True) for t in special + list(extra.values())])
    fast = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<bos>", eos_token="<eos>", mask_token="<mask>",
                                   model_max_length=MAX_POS)
    fast.save_pretrained(str(out))
    return fast


def glm4(out: Path) -> None:
    """Glm4ForCausalLM: a text architecture the fork newly declares."""
    from transformers import Glm4Config, Glm4ForCausalLM

    config = Glm4Config(**TEXT, num_hidden_layers=LAYERS, head_dim=HEAD_DIM,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                         "partial_rotary_factor": 0.5})
    config.architectures = ["Glm4ForCausalLM"]
    Glm4ForCausalLM(config).eval().save_pretrained(str(out))
    tokenizer(out)


def qwen2audio(out: Path) -> None:
    """Qwen2AudioForConditionalGeneration: a multimodal wrapper the fork newly declares (text prompts)."""
    from transformers import (Qwen2AudioConfig, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor,
                              WhisperFeatureExtractor)

    audio = dict(model_type="qwen2_audio_encoder", num_mel_bins=128, encoder_layers=1,
                 encoder_attention_heads=2, encoder_ffn_dim=128, d_model=64, max_source_positions=1500)
    text = dict(TEXT, model_type="qwen2", num_hidden_layers=LAYERS,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    config = Qwen2AudioConfig(audio_config=audio, text_config=text, audio_token_index=AUDIO)
    config.architectures = ["Qwen2AudioForConditionalGeneration"]
    Qwen2AudioForConditionalGeneration(config).eval().save_pretrained(str(out))
    # transformers writes language_model.model.model.*; published checkpoints (and vLLM) use one .model.
    weights = out / "model.safetensors"
    state = {k.replace("language_model.model.model.", "language_model.model."): v
             for k, v in load_file(str(weights)).items()}
    save_file(state, str(weights), metadata={"format": "pt"})
    words = tokenizer(out, {AUDIO: "<|AUDIO|>", AUDIO_BOS: "<|audio_bos|>", AUDIO_EOS: "<|audio_eos|>"})
    Qwen2AudioProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=128),
                        tokenizer=words).save_pretrained(str(out))


def _save(model_class, config, out: Path, architecture: str) -> None:
    config.architectures = [architecture]
    model_class(config).eval().save_pretrained(str(out))
    tokenizer(out)


def gemma3(out: Path) -> None:
    """Gemma3ForCausalLM (text): post-norm branches, sliding-window layers; the fork adds its aux capture."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(**TEXT, num_hidden_layers=LAYERS, head_dim=HEAD_DIM, query_pre_attn_scalar=HEAD_DIM,
                              sliding_window=16, hidden_activation="gelu_pytorch_tanh")
    _save(Gemma3ForCausalLM, config, out, "Gemma3ForCausalLM")


def mixtral(out: Path) -> None:
    """MixtralForCausalLM: sparse MoE; the fork adds its aux capture."""
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(**TEXT, num_hidden_layers=LAYERS, head_dim=HEAD_DIM, num_local_experts=4,
                           num_experts_per_tok=2)
    _save(MixtralForCausalLM, config, out, "MixtralForCausalLM")


def qwen2_moe(out: Path) -> None:
    """Qwen2MoeForCausalLM: routed + shared experts; the fork adds its aux capture."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    config = Qwen2MoeConfig(**TEXT, num_hidden_layers=LAYERS, num_experts=4, num_experts_per_tok=2,
                            moe_intermediate_size=FFN // 2, shared_expert_intermediate_size=FFN // 2,
                            decoder_sparse_step=1)
    _save(Qwen2MoeForCausalLM, config, out, "Qwen2MoeForCausalLM")


def glm4_moe(out: Path) -> None:
    """Glm4MoeForCausalLM (the GLM-4.5/4.6/4.7 family): one dense layer, then MoE; the fork adds its aux capture."""
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    config = Glm4MoeConfig(**TEXT, num_hidden_layers=LAYERS, head_dim=HEAD_DIM, n_routed_experts=4,
                           num_experts_per_tok=2, moe_intermediate_size=FFN // 2, n_shared_experts=1,
                           first_k_dense_replace=1, n_group=1, topk_group=1, norm_topk_prob=True,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                            "partial_rotary_factor": 0.5})
    _save(Glm4MoeForCausalLM, config, out, "Glm4MoeForCausalLM")


def _drafter(out: Path, config: dict, shapes: dict[str, tuple[int, ...]], seed: int) -> None:
    """Write config.json and safetensors: norms are ones, everything else small random."""
    generator = torch.Generator().manual_seed(seed)
    tensors = {name: torch.ones(shape) if "norm" in name else torch.randn(*shape, generator=generator) * 0.1
               for name, shape in shapes.items()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})


def _llama_fields() -> dict:
    fields = {k: v for k, v in TEXT.items() if k != "initializer_range"}
    return fields | dict(head_dim=HEAD_DIM, hidden_act="silu", rope_theta=10000.0, torch_dtype="float32")


def eagle3(out: Path) -> None:
    """An EAGLE3 head in the usual checkpoint layout: one midlayer over (embeds ++ hidden), fc over 3 aux states."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    config = dict(_llama_fields(), architectures=["LlamaForCausalLMEagle3"], model_type="llama",
                  num_hidden_layers=1, draft_vocab_size=VOCAB, target_hidden_size=HIDDEN)
    layer = {"input_layernorm.weight": (HIDDEN,), "hidden_norm.weight": (HIDDEN,),
             "post_attention_layernorm.weight": (HIDDEN,), "self_attn.q_proj.weight": (q, 2 * HIDDEN),
             "self_attn.k_proj.weight": (kv, 2 * HIDDEN), "self_attn.v_proj.weight": (kv, 2 * HIDDEN),
             "self_attn.o_proj.weight": (HIDDEN, q), "mlp.gate_proj.weight": (FFN, HIDDEN),
             "mlp.up_proj.weight": (FFN, HIDDEN), "mlp.down_proj.weight": (HIDDEN, FFN)}
    shapes = {"embed_tokens.weight": (VOCAB, HIDDEN), "fc.weight": (HIDDEN, 3 * HIDDEN),
              "norm.weight": (HIDDEN,), "lm_head.weight": (VOCAB, HIDDEN)}
    _drafter(out, config, shapes | {f"midlayer.{k}": v for k, v in layer.items()}, seed=1)


def dflash(out: Path, head_dim: int = HEAD_DIM, **extra) -> None:
    """A DFlash drafter: Qwen3-style layer, fc over the target layers named in dflash_config."""
    q, kv = HEADS * head_dim, KV_HEADS * head_dim
    config = dict(_llama_fields(), architectures=["DFlashDraftModel"], model_type="qwen3", num_hidden_layers=1,
                  attention_bias=False, target_hidden_size=HIDDEN, block_size=3, head_dim=head_dim,
                  dflash_config={"target_layer_ids": DFLASH_LAYER_IDS, "mask_token_id": MASK}, **extra)
    layer = {"input_layernorm.weight": (HIDDEN,), "post_attention_layernorm.weight": (HIDDEN,),
             "self_attn.q_proj.weight": (q, HIDDEN), "self_attn.k_proj.weight": (kv, HIDDEN),
             "self_attn.v_proj.weight": (kv, HIDDEN), "self_attn.o_proj.weight": (HIDDEN, q),
             "self_attn.q_norm.weight": (head_dim,), "self_attn.k_norm.weight": (head_dim,),
             "mlp.gate_proj.weight": (FFN, HIDDEN), "mlp.up_proj.weight": (FFN, HIDDEN),
             "mlp.down_proj.weight": (HIDDEN, FFN)}
    shapes = {"fc.weight": (HIDDEN, len(DFLASH_LAYER_IDS) * HIDDEN), "hidden_norm.weight": (HIDDEN,),
              "norm.weight": (HIDDEN,)}
    _drafter(out, config, shapes | {f"layers.0.{k}": v for k, v in layer.items()}, seed=2)


# The wide drafter's KV page: K and V x 128 tokens (the CPU block) x 2 heads x 80 dims x 4 bytes (float32).
WIDE_HEAD_DIM = 80
WIDE_BLOCK_BYTES = 2 * 128 * KV_HEADS * WIDE_HEAD_DIM * 4


def dflash_wide_window(out: Path) -> None:
    """A DFlash2-style drafter (non-causal sliding-window layer) whose KV heads are 2.5x the target's: its page does
    not divide the target's, so vLLM pads every target page up to it (the fork carves 2 target slots per block)."""
    dflash(out, head_dim=WIDE_HEAD_DIM, layer_types=["sliding_attention"], sliding_window=32, use_sliding_window=True,
           max_window_layers=0, is_causal=False)


def dflash_beyond_depth(out: Path) -> None:
    """The DFlash drafter, but its last target layer id (9) is past the 8-layer target: an incompatible pair."""
    dflash(out)
    config = json.loads((out / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [*DFLASH_LAYER_IDS[:-1], LAYERS + 1]
    (out / "config.json").write_text(json.dumps(config))


if __name__ == "__main__":
    root = Path(sys.argv[1])
    builders = {"glm4": glm4, "qwen2audio": qwen2audio, "eagle3": eagle3, "dflash": dflash,
                "dflash_beyond_depth": dflash_beyond_depth, "dflash_wide_window": dflash_wide_window}
    builders |= {"gemma3": gemma3, "mixtral": mixtral, "qwen2_moe": qwen2_moe, "glm4_moe": glm4_moe}
    for name in sys.argv[2:] or builders:  # the builders named (tests/test_cpu_e2e.py CASES), else all
        build = builders[name]
        torch.manual_seed(0)
        (root / name).mkdir(parents=True, exist_ok=True)
        build(root / name)
    print(root)
