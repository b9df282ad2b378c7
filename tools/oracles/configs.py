"""A tiny config per architecture, from transformers' own config class where it has the architecture."""

from __future__ import annotations

from shrink import HEAD_DIM, LAYERS, shrink_encoder, shrink_text
from fixes import FIXES
from targets import ALIASES, CONFIG_ONLY, config_class

TEXT_KEYS = ("text_config", "llm_config", "language_config", "thinker_config", "decoder", "text")
ENCODER_KEYS = ("vision_config", "audio_config", "encoder_config", "vq_config", "qformer_config", "talker_config",
                "token2wav_config", "code2wav_config", "acoustic_tokenizer_encoder_config",
                "semantic_tokenizer_encoder_config", "projector_config", "adapter_config")


def transformers_class(arch: str):
    """transformers' model class named like the vLLM architecture, or None."""
    import transformers

    try:
        return getattr(transformers, arch)
    except (AttributeError, ImportError, RuntimeError):
        return None


def _shrink_nested(data: dict, layers: int) -> None:
    """Shrink the text part and the encoders of a (possibly composite) config dict, in place."""
    texts = [k for k in TEXT_KEYS if isinstance(data.get(k), dict)]
    for key in texts:
        if key == "thinker_config":  # Qwen-Omni: the thinker holds text, audio and vision
            _shrink_nested(data[key], layers)
        else:
            shrink_text(data[key], layers)
    if not texts:
        shrink_text(data, layers)
    for key in ENCODER_KEYS:
        if isinstance(data.get(key), dict):
            shrink_encoder(data[key])


def _uses_mrope(cls) -> bool:
    """The model splits its rotary dimensions into (temporal, height, width) sections, defaulting them in code."""
    import inspect
    import sys

    try:
        return "mrope_section" in inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError):
        return False


def _add_mrope(data: dict) -> None:
    """An explicit M-RoPE split for the tiny head (the code's default is for the published head size)."""
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
    if isinstance(data.get("thinker_config"), dict):
        text = data["thinker_config"].get("text_config", text)
    rope = text.get("rope_parameters")
    rope = dict(rope) if isinstance(rope, dict) else {"rope_type": "default", "rope_theta": 10000.0}
    if not rope or all(isinstance(v, dict) for v in rope.values()):
        return
    half = int(HEAD_DIM * rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 1.0))) // 2
    rope["mrope_section"] = [half // 4, 3 * half // 8, half - half // 4 - 3 * half // 8]  # published: 1 : 1.5 : 1.5
    text["rope_parameters"] = rope


def reference_class(arch: str):
    """The Hugging Face model class whose states stand for `arch` (its own, or an alias's), or None."""
    return transformers_class(ALIASES.get(arch, arch))


def tiny_config(arch: str, layers: int = LAYERS):
    """The architecture's config class with the default values made tiny, `architectures` set to `arch`."""
    model_class = reference_class(arch)
    if model_class is not None:
        klass, fix_for = model_class.config_class, ALIASES.get(arch, arch)
    elif arch in CONFIG_ONLY:
        klass, fix_for = config_class(CONFIG_ONLY[arch][0]), arch
    else:
        raise LookupError(f"transformers {_version()} does not implement {arch} and no stand-in config is known")
    data = klass().to_dict()
    _shrink_nested(data, layers)
    if model_class is not None and _uses_mrope(model_class):
        _add_mrope(data)
    fix = FIXES.get(fix_for)
    if fix is not None:
        fix(data)
    if arch in CONFIG_ONLY:
        data.update(CONFIG_ONLY[arch][1])
    data["architectures"] = [arch]
    for key in ("transformers_version", "model_type"):
        data.pop(key, None)
    return klass(**data)


def _version() -> str:
    import transformers

    return transformers.__version__
