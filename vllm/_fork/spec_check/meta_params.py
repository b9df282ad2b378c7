"""Parameter counts from the model class itself: transformers' class for the config, built on the meta device.

Used where params.py's formulas do not know a family's config fields (NemotronH's Mamba-2 mixers, BLOOM's
fused QKV): the class's own parameter shapes are counted, and split the way vLLM shards them by name (the
embedding and lm_head are vocab-parallel, routed experts follow EP, everything else is split by TP). Norms and
biases count as TP-split; they are well under 0.1 %. Building even a 176B model on meta takes about 0.3 s.
"""

from __future__ import annotations

from vllm._fork.spec_check.params import Params

# Names of the input embedding in transformers' classes (Llama, GPT-2, BLOOM, NemotronH, ...).
EMBEDDINGS = ("embed_tokens", "wte", "word_embeddings", "embeddings", "embed_in")


class NoClass(Exception):
    """transformers has no class for this config here, or it does not build on the meta device."""


def _model(config: dict):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if config.get("auto_map"):  # remote code: never executed by spec-check
        raise NoClass("the config names remote code (auto_map)")
    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "auto_map")}
    try:
        resolved = AutoConfig.for_model(config["model_type"], **fields)
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(resolved)
    except (KeyError, ValueError, TypeError, AttributeError, ImportError, RuntimeError) as exc:
        raise NoClass(f"{type(exc).__name__}: {exc}") from None


def count(config: dict) -> Params:
    """Parameters of the checkpoint's main model by sharding, from its transformers class on meta."""
    model = _model(config)
    params = Params(num_layers=int(getattr(model.config, "num_hidden_layers", 1) or 1),
                    notes=[f"counted from transformers' {type(model).__name__} on the meta device"])
    for name, param in model.named_parameters():  # tied weights are listed once
        parts = name.split(".")
        if parts[-2] in EMBEDDINGS or "embed_tokens" in parts:
            params.embed += param.numel()
        elif parts[0] == "lm_head":
            params.lm_head += param.numel()
        elif "experts" in parts:
            params.experts += param.numel()
        else:
            params.layers += param.numel()
    return params
