"""The fork's EAGLE3 contract at run time: refuse targets known to declare SupportsEagle3 without aux capture."""

from __future__ import annotations

from typing import Any

# Methods whose drafter reads auxiliary hidden states from the target (eagle3 unless its checkpoint
# turns use_aux_hidden_state off). DFlash2 drafts run under "dflash".
AUX_METHODS = ("eagle3", "dflash", "dspark", "extract_hidden_states")

# Architectures that declare SupportsEagle3 upstream although their decoder records no auxiliary
# hidden states: vLLM would load every weight and then fail an assert. Each entry: why, and what works.
# Empty while every such architecture captures on the fork (MiMo, Exaone4.5, CohereCompass and Qwen4Exp
# record aux states through edits/); the audit reads this table and fails when it is missing.
NOT_IMPLEMENTED: dict[str, tuple[str, str]] = {}

def needs_aux_hidden_states(spec_config: Any) -> bool:
    """True when the configured drafter reads the target's auxiliary hidden states."""
    method = getattr(spec_config, "method", None)
    if method == "eagle3":
        draft = getattr(spec_config, "draft_model_config", None)
        eagle_config = getattr(getattr(draft, "hf_config", None), "eagle_config", None) or {}
        return bool(eagle_config.get("use_aux_hidden_state", True))
    return method in AUX_METHODS


def model_architectures(model_config: Any) -> list[str]:
    """Architecture names a ModelConfig knows (the resolved one first, then the checkpoint's), no repeats."""
    if model_config is None:
        return []
    names = [getattr(model_config, "architecture", None)]
    names += list(getattr(model_config, "architectures", None) or [])
    names += list(getattr(getattr(model_config, "hf_config", None), "architectures", None) or [])
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def refuse_known_unsupported_target(spec_config: Any) -> None:
    """Fail config validation, before any weight loads, for a target known to lack aux capture."""
    if not needs_aux_hidden_states(spec_config):
        return
    for arch in model_architectures(getattr(spec_config, "target_model_config", None)):
        if arch in NOT_IMPLEMENTED:
            reason, alternative = NOT_IMPLEMENTED[arch]
            raise ValueError(
                f"speculative method '{spec_config.method}' cannot run on {arch}: the drafter needs the "
                f"target's auxiliary hidden states, and {reason}. Use {alternative} instead."
            )
