"""Architectures that generate text but cannot speculate at all in this vLLM, for a reason the audit can see."""

from __future__ import annotations

from forktool.sourcetree import SourceTree

# Mamba-1's mixer (vLLM 0.33.0 mamba_mixer.py) keeps one SSM and conv state per request: its state shape has no
# draft-token slots (MambaStateShapeCalculator.mamba1_state_shape takes no num_spec, unlike Mamba-2 and GDN) and
# its decode path ignores num_accepted_tokens, so the runner cannot roll rejected draft tokens back.
MAMBA1_MIXER = ("vllm.model_executor.layers.mamba.mamba_mixer", "MambaMixer")
MAMBA1_REASON = ("Mamba-1 layers (MambaMixer) keep one state per request, with no slots for draft tokens and no "
                 "use of the accepted-token counts, so the runner cannot roll rejected drafts back: no "
                 "speculative method works on this architecture")


def unsupported_reason(tree: SourceTree, modules: list[str]) -> str:
    """Why speculation cannot work on a model built from these modules' classes ("" when nothing is known)."""
    for name in modules:
        module = tree.module(name)
        if module is not None and MAMBA1_MIXER in module.imports.get(MAMBA1_MIXER[1], []):
            return MAMBA1_REASON
    return ""
