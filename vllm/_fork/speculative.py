"""The fork's hooks in SpeculativeConfig.__post_init__: method aliases first, whole-config checks last."""

from __future__ import annotations

import logging
from typing import Any

from vllm._fork.eagle3 import model_architectures, refuse_known_unsupported_target

logger = logging.getLogger("vllm._fork")

# Model cards say `method: "dflash2"`; vLLM runs DFlash2 drafts under "dflash" and picks the DFlash2
# speculator from the draft checkpoint's architecture.
DFLASH2_ALIAS, DFLASH2_ARCHITECTURE = "dflash2", "DFlash2DraftModel"
_REQUESTED = "_fork_requested_method"


def normalize_method_alias(spec_config: Any) -> None:
    """Map method dflash2 to dflash, remembering what was asked so the draft can be checked later."""
    if spec_config.method == DFLASH2_ALIAS:
        object.__setattr__(spec_config, _REQUESTED, DFLASH2_ALIAS)
        spec_config.method = "dflash"
        logger.info("speculative method 'dflash2' runs as method 'dflash' with the DFlash2 draft")


def validate_speculative_config(spec_config: Any) -> None:
    """Checks that need the whole config (method, draft and target); each failure is one line."""
    if getattr(spec_config, _REQUESTED, None) == DFLASH2_ALIAS:
        found = model_architectures(getattr(spec_config, "draft_model_config", None))
        if DFLASH2_ARCHITECTURE not in found:
            model = getattr(spec_config, "model", None)
            raise ValueError(
                f"speculative method 'dflash2' needs a DFlash2 draft ({DFLASH2_ARCHITECTURE}), but {model} is "
                f"{', '.join(found) or 'no known architecture'}: use method 'dflash' for this checkpoint."
            )
    refuse_known_unsupported_target(spec_config)
