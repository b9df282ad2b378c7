"""Generation architectures the fork leaves without aux capture, each with the reason (checked against the audit)."""

from __future__ import annotations

import ast

from forktool.sourcetree import ClassRef

LOOPED = ("the same layers run several times per token (weight-tied recurrence), so a layer index names several "
          "states and neither the protocol's layer numbering nor a draft's aux layer ids pick one; no published "
          "EAGLE3/DFlash draft defines it")
HYPER = ("with intra-layer hyper-connections (enable_ihc) the stream is hc parallel copies [tokens, hc, hidden] that "
         "only the learned hc_head collapses after the last layer; which combination a draft reads (a plain mean, "
         "as Qwen4Exp and GLM-5.3-Flash record, or hc_head's mix) is not decided, and with iHC off the stream is the "
         "usual hidden + residual")
DEFERRED = ("each layer defers its MLP add (a pending delta and short convolution) into the next layer's fused "
            "kernel, so the stream between layers never exists as a tensor; capture needs that completion per "
            "chosen layer")
GEMMA3N = ("AltUp carries altup_num_inputs parallel predictions between layers, and the decoder is split into a "
           "self-decoder and a KV-sharing cross-decoder whose layers, with kv_sharing_fast_prefill, run only on the "
           "tokens that need logits, so later layers' states do not cover every token a drafter reads")

def _no_edit_yet(decoder: str) -> str:
    return (f"new in vLLM 0.34.0 and not given capture by the fork yet: {decoder} keeps one plain stream between "
            "layers (none of the obstacles above), so what it lacks is a capture edit")


LFM3 = _no_edit_yet("Lfm3Model, like Lfm2Model (edits/vllm/model_executor/models/lfm2.py.toml),")

# module.Class -> why its decoder still records no aux hidden states on the fork.
NOT_CAPTURED = {
    "vllm.model_executor.models.alice_ai.AliceAIForCausalLM":
        "there is no residual stream: each layer reads its own learned attention-weighted mix of earlier block "
        "outputs (Attention Residuals), so no one hidden state per layer exists to hand a drafter",
    "vllm.model_executor.models.dory.DoryForCausalLM": LOOPED,
    "vllm.model_executor.models.hrm_text.HrmTextForCausalLM": LOOPED,
    "vllm.model_executor.models.iquest_loopcoder.IQuestLoopCoderForCausalLM": LOOPED,
    "vllm.model_executor.models.gemma3n.Gemma3nForCausalLM": GEMMA3N,
    "vllm.model_executor.models.gemma3n_mm.Gemma3nForConditionalGeneration": GEMMA3N,
    "vllm.models.hy_v4.nvidia.model.HYV4ForCausalLM": HYPER,
    "vllm.models.hy_v4.amd.model.HYV4ForCausalLM": HYPER,
    "vllm.models.inkling.nvidia.model.InklingForCausalLM": DEFERRED,
    "vllm.models.inkling.amd.model.InklingForCausalLM": DEFERRED,
    "vllm.model_executor.models.solar.SolarForCausalLM":
        "its skip connections (bskcn) blend earlier streams into hidden and residual before some layers, so the "
        "output of layer i and the stream entering layer i + 1 differ there; which one a Solar draft is trained on "
        "is not known without a published draft",
    "vllm.model_executor.models.lfm3.Lfm3ForCausalLM": LFM3,
    "vllm.model_executor.models.lfm3_vl.Lfm3VlForConditionalGeneration": LFM3,
    "vllm.model_executor.models.lfm3_audio.Lfm3AudioForConditionalGeneration": LFM3,
    "vllm.model_executor.models.canary.CanaryForConditionalGeneration": _no_edit_yet(
        "CanaryDecoder, like CohereASRDecoder (edits/vllm/model_executor/models/cohere_asr.py.toml),"),
    "vllm.model_executor.models.zaya.ZayaForCausalLM": _no_edit_yet(
        "ZayaModel (the fp32 residual stream each ZayaDecoderLayer returns)"),
    "vllm.models.step5.nvidia.model.Step5ForCausalLM":
        "with sequence parallelism the stream inside the layer loop is sharded across tensor-parallel ranks (it is "
        "gathered only after the last layer), so every chosen layer's state needs its own all-gather",
}

STUB_REASON = "its __init__ always raises (a stub: the architecture cannot be built on this vLLM), so nothing runs"


def is_stub(ref: ClassRef) -> bool:
    """The class's own __init__ raises unconditionally (a top-level `raise` in its body)."""
    init = next((n for n in ref.node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    return init is not None and any(isinstance(statement, ast.Raise) for statement in init.body)
