"""Draft checkpoints (configs only: the loaders build them with dummy weights) sized to one target, per method."""

from __future__ import annotations

import json
from pathlib import Path

METHODS = ("eagle3", "dflash", "dspark", "extract_hidden_states")  # every method that reads aux hidden states
MASK_TOKEN = 4
HEADS, KV_HEADS, HEAD_DIM, FFN = 4, 2, 32, 256


def text_fields(config: dict) -> dict:
    """The decoder part of a config.json (nested under text_config, a thinker, or at the top)."""
    for key in ("thinker_config", "text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            return text_fields(config[key]) if key == "thinker_config" else config[key]
    return config


def target_shape(config: dict) -> tuple[int, int, int]:
    """(hidden size, layers, vocabulary) of a target's decoder."""
    text = text_fields(config)
    hidden = next(text[k] for k in ("hidden_size", "n_embd", "d_model", "dim") if isinstance(text.get(k), int))
    layers = next(text[k] for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers") if isinstance(text.get(k), int))
    return hidden, layers, text.get("vocab_size") or config.get("vocab_size")


def _llama(hidden: int, vocab: int) -> dict:
    return dict(hidden_size=hidden, intermediate_size=FFN, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                head_dim=HEAD_DIM, num_hidden_layers=1, vocab_size=vocab, max_position_embeddings=4096,
                rms_norm_eps=1e-6, hidden_act="silu", rope_theta=10000.0, tie_word_embeddings=False,
                torch_dtype="bfloat16")


def draft_layers(layers: int) -> list[int]:
    """The target layers a draft reads, as published DFlash drafts choose them: early, middle, late."""
    return sorted({1, layers // 2, layers - 2})


def draft_config(method: str, hidden: int, layers: int, vocab: int) -> dict | None:
    """The draft config.json for `method` over a target of this shape (None: the method takes no draft model)."""
    aux = draft_layers(layers)
    if method == "eagle3":
        return dict(_llama(hidden, vocab), architectures=["LlamaForCausalLMEagle3"], model_type="llama",
                    draft_vocab_size=vocab, target_hidden_size=hidden)
    if method == "dflash":
        return dict(_llama(hidden, vocab), architectures=["DFlashDraftModel"], model_type="qwen3",
                    attention_bias=False, target_hidden_size=hidden, block_size=3,
                    dflash_config={"target_layer_ids": aux, "mask_token_id": MASK_TOKEN})
    if method == "dspark":  # the Qwen3 DSpark draft: attention of any target kind (K3's is MLA-only)
        return dict(_llama(hidden, vocab), architectures=["Qwen3DSparkModel"], model_type="qwen3",
                    attention_bias=False, target_hidden_size=hidden, block_size=4, markov_rank=16,
                    draft_vocab_size=vocab, dflash_config={"target_layer_ids": aux, "mask_token_id": MASK_TOKEN})
    return None


def _layer_shapes(hidden: int, width: int, qk_norm: bool) -> dict[str, tuple[int, ...]]:
    """One Llama/Qwen3 decoder layer whose attention reads `width` features (EAGLE3: embeds ++ hidden)."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    shapes = {"input_layernorm.weight": (hidden,), "post_attention_layernorm.weight": (hidden,),
              "self_attn.q_proj.weight": (q, width), "self_attn.k_proj.weight": (kv, width),
              "self_attn.v_proj.weight": (kv, width), "self_attn.o_proj.weight": (hidden, q),
              "mlp.gate_proj.weight": (FFN, hidden), "mlp.up_proj.weight": (FFN, hidden),
              "mlp.down_proj.weight": (hidden, FFN)}
    if qk_norm:
        shapes |= {"self_attn.q_norm.weight": (HEAD_DIM,), "self_attn.k_norm.weight": (HEAD_DIM,)}
    return shapes


def draft_weights(method: str, hidden: int, vocab: int, aux: int) -> dict[str, tuple[int, ...]]:
    """Parameter shapes of the checkpoint layout each draft loads (EAGLE3: `midlayer.*`; DFlash: `layers.0.*`);
    loading them runs the draft's own weight post-processing, which dummy weights skip."""
    if method == "eagle3":
        layer = _layer_shapes(hidden, 2 * hidden, qk_norm=False) | {"hidden_norm.weight": (hidden,)}
        return {"fc.weight": (hidden, aux * hidden), "norm.weight": (hidden,), "lm_head.weight": (vocab, hidden),
                **{f"midlayer.{k}": v for k, v in layer.items()}}
    if method == "dflash":
        layer = _layer_shapes(hidden, hidden, qk_norm=True)
        return {"fc.weight": (hidden, aux * hidden), "hidden_norm.weight": (hidden,), "norm.weight": (hidden,),
                **{f"layers.0.{k}": v for k, v in layer.items()}}
    return {}


def _write_weights(folder: Path, shapes: dict[str, tuple[int, ...]], seed: int = 1) -> None:
    """Norms one, everything else small random (the drafter's numbers are irrelevant; its loading is not)."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed)
    tensors = {name: torch.ones(shape) if "norm" in name else torch.randn(*shape, generator=generator) * 0.05
               for name, shape in shapes.items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def speculative_config(method: str, target: Path, root: Path, aux_layers: list[int] | None = None,
                       weights: bool = False) -> dict:
    """The --speculative-config for `method` over the target folder; draft folders are written under root
    (with random weights when `weights`: runner V1 really runs the draft)."""
    config = json.loads((target / "config.json").read_text())
    hidden, layers, vocab = target_shape(config)
    if method == "extract_hidden_states":
        layer_ids = aux_layers if aux_layers is not None else draft_layers(layers)
        return {"method": method, "num_speculative_tokens": 1,
                "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}}}
    folder = root / target.name / method
    folder.mkdir(parents=True, exist_ok=True)
    config = draft_config(method, hidden, layers, vocab)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    if weights:
        aux = len(config.get("dflash_config", {}).get("target_layer_ids", [])) or 3
        _write_weights(folder, draft_weights(method, hidden, vocab, aux))
    return {"method": method, "model": str(folder), "num_speculative_tokens": 2}
