"""Rules a model's or speculator's own code sets, read from that code (vLLM 0.34.0), not from a table of ours.

* A draft run by method `draft_model` is called as a standalone language model: runner V2's
  StandaloneARSpeculator._run_model (v1/worker/gpu/spec_decode/standalone_ar/speculator.py) calls
  `model(input_ids=..., positions=...)` and nothing else. A draft class whose `forward` needs more (an EAGLE or
  EAGLE3 head needs the target's `hidden_states`) raises TypeError on the first draft step, which the engine
  takes during start-up. vLLM refuses a mismatched method only where the draft class declares its speculator
  (`speculator_config_class`, speculator_config.py `_resolve_checkpoint_config_class`); EAGLE heads do not.
* Method `mtp` takes the target's own checkpoint as its draft (MTPSpeculatorConfig.default_model) and keeps the
  configured method whatever the draft is. Where SpeculativeConfig maps the target's model_type to no MTP model
  (`MTPSpeculatorConfig.matches`: the draft's model_type is not one of MTPModelTypes), MTPSpeculator's
  load_eagle_model builds the target class a second time in the same config, and the first attention layer is
  refused by name (layers/attention/attention.py "Duplicate layer name"): after the target's weights are loaded.
"""

from __future__ import annotations

import inspect

from vllm._fork.spec_check.findings import FAIL, Finding
from vllm._fork.spec_check.inspection import model_class
from vllm._fork.vocabulary import CheckName

STANDALONE = CheckName.STANDALONE_DRAFT
SPECULATIVE = CheckName.SPECULATIVE_CONFIG
STANDALONE_INPUTS = ("self", "input_ids", "positions")  # what StandaloneARSpeculator passes


def missing_standalone_inputs(cls) -> list[str]:
    """The inputs `cls.forward` requires beyond the ones a standalone draft is called with."""
    parameters = inspect.signature(cls.forward).parameters.values()
    return [p.name for p in parameters if p.default is inspect.Parameter.empty and p.name not in STANDALONE_INPUTS
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]


def standalone_draft(spec_config, speculator: str) -> Finding | None:
    """A draft that method draft_model would call without the inputs its forward requires."""
    if speculator != "StandaloneARSpeculator" or spec_config.draft_model_config is None:
        return None
    cls = model_class(spec_config.draft_model_config)
    missing = missing_standalone_inputs(cls) if cls is not None else []
    if not missing:
        return None
    return Finding(STANDALONE, FAIL, f"method '{spec_config.method}' runs {cls.__name__} as a standalone model, "
                   "called with input_ids and positions only (StandaloneARSpeculator), but its forward also needs "
                   f"{', '.join(missing)}: the first draft step, taken while the engine starts, raises TypeError",
                   "give the method this draft was trained for (eagle3 for an EAGLE3 head), or leave 'method' out "
                   "and vLLM detects it from the draft")


def mtp_without_mtp_model(spec_config) -> Finding | None:
    """Method mtp on a target whose model_type vLLM maps to no MTP model: the draft is the target class again."""
    if spec_config.method != "mtp" or spec_config.draft_model_config is None:
        return None
    from vllm.v1.worker.gpu.spec_decode.mtp.config import MTPSpeculatorConfig

    if MTPSpeculatorConfig.matches(spec_config):
        return None
    draft = spec_config.draft_model_config
    arch = ", ".join(draft.architectures or []) or "the target's class"
    return Finding(SPECULATIVE, FAIL, f"method mtp needs an MTP model, and vLLM has none for model_type "
                   f"'{draft.hf_config.model_type}': the draft is {arch} again, built beside the target after its "
                   "weights load, and its first attention layer is refused ('Duplicate layer name')",
                   "use a drafter method (eagle3, dflash) with a draft trained for this target, or ngram")
