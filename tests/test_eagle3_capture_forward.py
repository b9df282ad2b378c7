"""Each decoder the fork makes capture aux hidden states runs its real forward under its real outer class.

The outer class and every module down to the decoder are the real classes, built without their __init__ (it
needs a VllmConfig, weights and kernels) and wired as the constructor would. The decoder's layers are stand-ins
that follow the model's own layer contract (which arguments carry the stream, what a layer returns), so a capture
of the wrong value (hidden alone where the residual holds half the stream, or hidden + residual where the layer
already returns the whole stream) is seen. Two cases run the real decoder layers with stand-in leaves (norms,
attention, MLP) against a hand-computed recurrence: Gemma-3's post-norms and Cohere's parallel blocks.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from fork_testing import assert_aux_states, load_class, one_pipeline_rank, real_chain, skeleton

HIDDEN, TOKENS, LAYERS = 8, 5, 6
CHOSEN = (0, 2, 3, 6)  # the embedding, two inner layers and the stream after the last layer
M = "vllm.model_executor.models"
BAILING3 = f"{M}.bailing_moe_v3.BailingMoeV3"


@dataclass(frozen=True)
class Case:
    """An outer class, the path to its decoder (attribute, class) and the layer contract of that decoder."""

    outer: str
    path: tuple[tuple[str, str], ...]
    layer: str = "split"  # split: (hidden, residual) sum to the stream; whole: hidden is the stream; single
    hidden_at: int = 1  # positional index of the stream argument in the layer call
    residual_at: int | None = 2
    norm: str = "norm"

    @property
    def id(self) -> str:
        return self.outer.rpartition(".")[2]


def _lm(outer: str, decoder: str) -> Case:
    return Case(outer, (("model", decoder),))


CASES = [
    _lm(f"{M}.gemma2.Gemma2ForCausalLM", f"{M}.gemma2.Gemma2Model"),
    _lm(f"{M}.gemma3.Gemma3ForCausalLM", f"{M}.gemma3.Gemma3Model"),
    Case(f"{M}.gemma3_mm.Gemma3ForConditionalGeneration",
         (("language_model", f"{M}.gemma3.Gemma3ForCausalLM"), ("model", f"{M}.gemma3.Gemma3Model"))),
    _lm(f"{M}.mixtral.MixtralForCausalLM", f"{M}.mixtral.MixtralModel"),
    _lm(f"{M}.internlm2.InternLM2ForCausalLM", f"{M}.internlm2.InternLM2Model"),
    _lm("vllm.models.flint.model.FlintForCausalLM", "vllm.models.flint.model.FlintModel"),
    Case(f"{M}.bailing_moe_linear.BailingMoeV25ForCausalLM",
         (("model", f"{M}.bailing_moe_linear.BailingMoeV25Model"),), residual_at=None),
    Case(f"{M}.bailing_moe_v3.BailingMoeV3ForCausalLM", (("model", f"{BAILING3}Model"),), hidden_at=0),
    Case(f"{M}.bailing_moe_v3_vl.BailingMoeV3VLForConditionalGeneration",
         (("language_model", f"{BAILING3}ForCausalLM"), ("model", f"{BAILING3}Model")), hidden_at=0),
    Case(f"{M}.ming_v3_asr.MingV3ASRForConditionalGeneration",
         (("language_model", f"{BAILING3}ForCausalLM"), ("model", f"{BAILING3}Model")), hidden_at=0),
    _lm(f"{M}.qwen2_moe.Qwen2MoeForCausalLM", f"{M}.qwen2_moe.Qwen2MoeModel"),
    _lm(f"{M}.glm4_moe.Glm4MoeForCausalLM", f"{M}.glm4_moe.Glm4MoeModel"),
    _lm(f"{M}.glm4_moe_lite.Glm4MoeLiteForCausalLM", f"{M}.glm4_moe_lite.Glm4MoeLiteModel"),
    _lm(f"{M}.ernie45_moe.Ernie4_5_MoeForCausalLM", f"{M}.ernie45_moe.Ernie4_5_MoeModel"),
    Case(f"{M}.ernie45_vl.Ernie4_5_VLMoeForConditionalGeneration",
         (("language_model", f"{M}.ernie45_vl_moe.Ernie4_5_VLMoeForCausalLM"),
          ("model", f"{M}.ernie45_vl_moe.Ernie4_5_VLMoeModel"))),
    _lm(f"{M}.step3_text.Step3TextForCausalLM", f"{M}.step3_text.Step3TextModel"),
    _lm(f"{M}.longcat_flash.LongcatFlashForCausalLM", f"{M}.longcat_flash.FlashModel"),
    _lm(f"{M}.longcat_flash_ngram.LongcatFlashNgramForCausalLM", f"{M}.longcat_flash_ngram.FlashNgramModel"),
    Case(f"{M}.commandr.CohereForCausalLM", (("model", f"{M}.commandr.CohereModel"),), layer="whole",
         norm="ignoring"),
    _lm(f"{M}.nemotron.NemotronForCausalLM", f"{M}.nemotron.NemotronModel"),
    Case(f"{M}.phimoe.PhiMoEForCausalLM", (("model", f"{M}.phimoe.PhiMoEModel"),), layer="whole"),
    Case(f"{M}.bailing_moe.BailingMoeForCausalLM", (("model", f"{M}.bailing_moe.BailingMoeModel"),), hidden_at=0),
    Case(f"{M}.bailing_moe.BailingMoeV2ForCausalLM", (("model", f"{M}.bailing_moe.BailingMoeModel"),), hidden_at=0),
    Case(f"{M}.falcon_h1.FalconH1ForCausalLM", (("model", f"{M}.falcon_h1.FalconH1Model"),), layer="single",
         residual_at=None, norm="final_layernorm"),
    _lm(f"{M}.exaone_moe.ExaoneMoeForCausalLM", f"{M}.exaone_moe.ExaoneMoeModel"),
    _lm(f"{M}.hy_v3.HYV3ForCausalLM", f"{M}.hy_v3.HYV3Model"),
    Case(f"{M}.step3p5.Step3p5ForCausalLM", (("model", f"{M}.step3p5.Step3p5Model"),), layer="single",
         residual_at=None),
    Case(f"{M}.param2moe.Param2MoEForCausalLM", (("model", f"{M}.param2moe.Param2MoEModel"),), hidden_at=0),
    Case(f"{M}.orion.OrionForCausalLM", (("model", f"{M}.orion.OrionModel"),), layer="single", residual_at=None),
    Case(f"{M}.hyperclovax.HyperCLOVAXForCausalLM", (("model", f"{M}.hyperclovax.HyperCLOVAXModel"),),
         layer="whole"),
    _lm(f"{M}.rnj1.Rnj1ForCausalLM", f"{M}.rnj1.Rnj1Model"),
    Case(f"{M}.lfm2.Lfm2ForCausalLM", (("model", f"{M}.lfm2.Lfm2Model"),), norm="embedding_norm"),
    Case(f"{M}.lfm2_moe.Lfm2MoeForCausalLM", (("model", f"{M}.lfm2_moe.Lfm2MoeModel"),), norm="embedding_norm"),
    _lm(f"{M}.openpangu.PanguEmbeddedForCausalLM", f"{M}.openpangu.OpenPanguModel"),
    _lm(f"{M}.openpangu.PanguUltraMoEForCausalLM", f"{M}.openpangu.OpenPanguModel"),
    Case(f"{M}.openpangu_vl.OpenPanguVLForConditionalGeneration",
         (("language_model", f"{M}.openpangu.PanguEmbeddedForCausalLM"), ("model", f"{M}.openpangu.OpenPanguModel"))),
    _lm(f"{M}.nemotron_nas.DeciLMForCausalLM", f"{M}.nemotron_nas.DeciModel"),
    Case(f"{M}.granitemoehybrid.GraniteMoeHybridForCausalLM",
         (("model", f"{M}.granitemoehybrid.GraniteMoeHybridModel"),), layer="whole"),
    Case(f"{M}.olmo_hybrid.OlmoHybridForCausalLM", (("model", f"{M}.olmo_hybrid.OlmoHybridModel"),),
         layer="single", residual_at=None),
    _lm(f"{M}.molmo.MolmoForCausalLM", f"{M}.molmo.MolmoModel"),
    _lm(f"{M}.molmo2.Molmo2ForConditionalGeneration", f"{M}.molmo2.Molmo2TextModel"),
    Case(f"{M}.zamba2.Zamba2ForCausalLM", (("model", f"{M}.zamba2.Zamba2Model"),), layer="single", hidden_at=0,
         residual_at=None, norm="final_layernorm"),
]


def _arg(args, kwargs, name, at):
    return kwargs[name] if name in kwargs else (args[at] if at is not None and at < len(args) else None)


class ContractLayer(torch.nn.Module):
    """A layer stand-in that adds one to the stream and hands it back the way the model's layers do."""

    def __init__(self, case: Case, index: int = 0):
        super().__init__()
        self.case = case
        self._is_no_op_attention = index % 2 == 1  # DeciModel's loop branches on it; both branches are run

    def forward(self, *args, **kwargs):
        hidden = _arg(args, kwargs, "hidden_states", self.case.hidden_at)
        residual = _arg(args, kwargs, "residual", self.case.residual_at)
        if self.case.layer == "split":  # the stream is split: a capture of hidden alone would miss the residual
            stream = hidden if residual is None else hidden + residual
            return torch.ones_like(hidden), stream
        if self.case.layer == "whole":  # the residual returned is not part of the stream: adding it is wrong
            return hidden + 1, hidden * 100
        return hidden + 1


class Norm(torch.nn.Module):
    """The final norm stand-in, without scaling: `fused` folds the residual in, `ignoring` leaves it out (Cohere)."""

    def __init__(self, fused: bool = True):
        super().__init__()
        self.fused = fused

    def forward(self, hidden, residual=None):
        if residual is None:
            return hidden
        return (hidden + residual, hidden + residual) if self.fused else (hidden, residual)


# Attributes some constructors set that the forward reads, with the value a plain text checkpoint gets.
WIRING = {
    "Ernie4_5_VLMoeForConditionalGeneration": {"visual_token_mask": None},  # no image in a text-only step
    "FalconH1Model": {"embedding_multiplier": 1.0},
    "GraniteMoeHybridModel": {"embedding_multiplier": 1.0},
    "HyperCLOVAXModel": {"config": SimpleNamespace(embedding_multiplier=1.0)},
}


# Module-level names a decoder's forward calls outside an engine step, with what a text-only step gives.
PATCHES = {
    # BailingMoeV25Model reads the step's attention metadata to hand it to its layers (stand-ins here).
    "BailingMoeV25ForCausalLM": {
        f"{M}.bailing_moe_linear.get_forward_context": lambda: SimpleNamespace(attn_metadata=None)},
}


def _build(case: Case, layers: list[torch.nn.Module] | None = None):
    """The real outer class with real intermediate modules down to the real decoder; stand-in layers."""
    chain = real_chain(case.outer, case.path)
    for instance in chain:
        for name, value in WIRING.get(type(instance).__name__, {}).items():
            setattr(instance, name, value)
    outer, decoder = chain[0], chain[-1]
    decoder.layers = torch.nn.ModuleList(layers or [ContractLayer(case, i) for i in range(LAYERS)])
    decoder.start_layer, decoder.end_layer = 0, LAYERS
    setattr(decoder, case.norm if case.norm != "ignoring" else "norm", Norm(fused=case.norm != "ignoring"))
    if "config" not in WIRING.get(type(decoder).__name__, {}):
        decoder.config = SimpleNamespace()  # no model-specific switch set: the plain text path
    return outer, decoder


@pytest.fixture(autouse=True)
def single_rank(monkeypatch):
    one_pipeline_rank(monkeypatch)


def _run(outer, chosen=CHOSEN):
    outer.set_aux_hidden_state_layers(chosen)
    embeds = torch.randn(TOKENS, HIDDEN)
    # InternLM2's forward takes intermediate_tensors without a default.
    takes = inspect.signature(outer.forward).parameters
    extra = {"intermediate_tensors": None} if "intermediate_tensors" in takes else {}
    with torch.no_grad():
        out = outer.forward(input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=embeds, **extra)
    return embeds, out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_captured_decoder_returns_the_chosen_stream_states(case, monkeypatch):
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

    for target, value in PATCHES.get(case.id, {}).items():
        monkeypatch.setattr(target, value)

    outer, decoder = _build(case)
    assert supports_eagle3(outer) and isinstance(decoder, EagleModelMixin)
    embeds, out = _run(outer)
    assert decoder.aux_hidden_state_layers == CHOSEN
    # The stream entering layer L is the input plus L: exactly the chosen layers, in order.
    assert_aux_states(out, CHOSEN, LAYERS, lambda layer: embeds + layer, case.id)
    assert outer.get_eagle3_default_aux_hidden_state_layers() == (2, LAYERS // 2, LAYERS - 3)


@pytest.mark.parametrize("case", CASES[:1], ids=lambda c: c.id)
def test_without_aux_layers_the_decoder_returns_a_plain_tensor(case):
    outer, _ = _build(case)
    embeds, out = _run(outer, chosen=())
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, embeds + LAYERS)


class HalvingNorm(torch.nn.Module):
    """n(x) = x / 2; with a residual it first adds it and returns (n(x + r), x + r), like a fused add+norm."""

    def forward(self, hidden, residual=None):
        if residual is None:
            return hidden / 2
        total = hidden + residual
        return total / 2, total


class PlusOne(torch.nn.Module):
    def forward(self, positions=None, hidden_states=None, **kwargs):
        return hidden_states + 1


class Triple(torch.nn.Module):
    def forward(self, hidden_states):
        return hidden_states * 3


def _real_layer(key: str, **leaves):
    layer = skeleton(load_class(key))
    for name, module in leaves.items():
        setattr(layer, name, module)
    return layer


def _check_recurrence(case: Case, layers, step):
    outer, _ = _build(case, layers)
    embeds, (hidden, aux) = _run(outer)
    states = [embeds]
    for _ in range(LAYERS):
        states.append(step(states[-1]))
    for layer, state in zip(CHOSEN, aux, strict=True):
        torch.testing.assert_close(state, states[layer])
    return hidden, states


def test_gemma3_post_norm_layers_capture_hidden_plus_residual():
    # Gemma-3 norms each branch output (post_attention / post_feedforward) before it joins the stream. With
    # n(x) = x/2, attention a(x) = x + 1 and MLP m(x) = 3x, a layer maps the stream S to
    #   r = S + n(a(n(S))) = S + (S/2 + 1)/2 = 5S/4 + 1/2,   out = r + n(m(n(r))) = r + 3r/4 = 35S/16 + 7/8,
    # returned as (3r/4, r): the state entering the next layer is hidden + residual.
    case = CASES[2]
    layers = [_real_layer(f"{M}.gemma3.Gemma3DecoderLayer", input_layernorm=HalvingNorm(), self_attn=PlusOne(),
                          post_attention_layernorm=HalvingNorm(), pre_feedforward_layernorm=HalvingNorm(),
                          mlp=Triple(), post_feedforward_layernorm=HalvingNorm()) for _ in range(LAYERS)]
    hidden, states = _check_recurrence(case, layers, lambda s: 35 * s / 16 + 7 / 8)
    torch.testing.assert_close(hidden, states[-1])  # the final stand-in norm folds the residual in unscaled


def test_cohere_parallel_blocks_capture_the_returned_hidden_alone():
    # Cohere's attention and MLP read the same normed input; the layer adds both to its input S and returns
    # (S + a(n(S)) + m(n(S)), S). With n(x) = x/2, a(x) = x + 1, m(x) = 3x: out = S + S/2 + 1 + 3S/2 = 3S + 1.
    # Adding the returned residual (the layer's input) would give 4S + 1.
    case = next(c for c in CASES if c.id == "CohereForCausalLM")
    layers = []
    for _ in range(LAYERS):
        layer = _real_layer(f"{M}.commandr.CohereDecoderLayer", input_layernorm=CohereNorm(), self_attn=PlusOne(),
                            mlp=Triple())
        layer.tp_size = 1
        layers.append(layer)
    hidden, states = _check_recurrence(case, layers, lambda s: 3 * s + 1)
    torch.testing.assert_close(hidden, states[-1])


class CohereNorm(torch.nn.Module):
    """Cohere's LayerNorm contract: normalises the hidden input and hands the residual back untouched."""

    def forward(self, hidden, residual=None):
        return hidden / 2, residual


def test_every_fork_capture_edit_has_a_case(project):
    from test_eagle3_capture_forward_more import CASES as FORMERLY_REFUSED  # MiMo, EXAONE 4, ... (own harness)
    from test_eagle3_capture_forward_outer import CASES as OUTSIDE_MODEL  # decoders at .transformer (own harness)

    decoders = {key.rpartition(".")[2] for case in CASES + FORMERLY_REFUSED + OUTSIDE_MODEL for _, key in case.path}
    captured = {e.params["function"].partition(".")[0] for e in project.edits() if e.op == "capture_aux_hidden_states"}
    assert captured <= decoders, f"capture edits without a forward case: {sorted(captured - decoders)}"
