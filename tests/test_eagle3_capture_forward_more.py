"""The targets the fork used to refuse (and their relatives) run their real forward and hand out the chosen aux states.

MiMo, Exaone4.5, CohereCompass and Qwen4Exp declared SupportsEagle3 upstream without recording anything; Granite4Vision's
decoder dropped the capture in its forward override. Each outer class and every module down to its decoder is the real
class, built without its __init__ (which needs a VllmConfig, weights and kernels) and wired as the constructor would.
The decoder's layers and final norm are stand-ins that follow the model's own layer contract, so capturing the wrong
value (hidden alone where the residual holds part of the stream, hidden + residual where a post-norm or parallel block
already returns the whole stream, an uncombined or single hyper-connection stream) changes the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from fork_testing import assert_aux_states, one_pipeline_rank, real_chain

HIDDEN, TOKENS, LAYERS = 8, 5, 6
CHOSEN = (0, 2, 3, 6)  # the stream entering the first layer, two inner layers, the output of the last layer
HC = 2  # Qwen4Exp hyper-connection streams in the stand-in
INJECT = (1.0, 3.0)  # per-stream injection weights of the stand-in combine: stream s gains INJECT[s] per layer
M = "vllm.model_executor.models"
Q = "vllm.models.qwen4_exp"


class SplitLayer(torch.nn.Module):
    """Pre-norm contract: the stream is hidden + residual; the layer adds one to it and returns (delta, rest)."""

    def forward(self, positions, hidden_states, residual):
        stream = hidden_states if residual is None else hidden_states + residual
        return torch.ones_like(stream), stream


class WholeLayer(torch.nn.Module):
    """Post-norm / parallel-block contract: hidden is the whole stream (plus one); the residual returned is its input."""

    def forward(self, positions, hidden_states, residual):
        return hidden_states + 1, hidden_states


class SingleLayer(torch.nn.Module):
    """Granite's contract: one tensor in, one out."""

    def forward(self, positions, hidden_states):
        return hidden_states + 1


class SplitNorm(torch.nn.Module):
    """A fused add + norm without scaling."""

    def forward(self, hidden, residual=None):
        return hidden if residual is None else (hidden + residual, hidden + residual)


class IgnoringNorm(torch.nn.Module):
    """Cohere's LayerNorm contract: the residual passes through untouched (and unused), without scaling."""

    def forward(self, hidden, residual=None):
        return hidden if residual is None else (hidden, residual)


class StreamCombine(torch.nn.Module):
    """hc_combine's contract without the kernel: every stream gains the block output, scaled per stream."""

    def combine(self, hidden_states, block_output, injection):
        streams = hidden_states.unflatten(-1, (HC, HIDDEN))
        return (streams + block_output.unsqueeze(-2) * injection.unsqueeze(-1)).flatten(-2)

    def combine_and_mix(self, hidden_states, block_output, injection):
        """The final mixer: completes the pending combine and samples the plain stream mean."""
        multi = hidden_states if block_output is None else self.combine(hidden_states, block_output, injection)
        return multi, multi.unflatten(-1, (HC, HIDDEN)).mean(dim=-2), None


class HyperLayer(torch.nn.Module):
    """Qwen4ExpDecoderLayer's contract: completes the pending combine, defers its own (block output of ones)."""

    def __init__(self):
        super().__init__()
        self.mlp_hyper_connection = StreamCombine()

    def forward(self, hidden_states, prev_block_output, prev_injection, positions, **kwargs):
        if prev_block_output is not None:
            hidden_states = self.mlp_hyper_connection.combine(hidden_states, prev_block_output, prev_injection)
        tokens = hidden_states.shape[0]
        return hidden_states, torch.ones(tokens, HIDDEN), torch.tensor(INJECT).expand(tokens, HC)


@dataclass(frozen=True)
class Case:
    """An outer class, the path to its decoder (attribute, class), and the decoder's layer, norm and wiring."""

    outer: str
    path: tuple[tuple[str, str], ...]
    layer: type = SplitLayer
    norm: type | None = SplitNorm
    outer_wiring: dict = field(default_factory=dict)
    decoder_wiring: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.outer.removeprefix("vllm.").replace(".", "-")


HYPER = {"config": SimpleNamespace(hc_count=HC, hidden_size=HIDDEN), "use_hc_sequence_parallel": False,
         "_mtp_hidden_buffer": None}
QWEN4_CASES = [
    case
    for platform in ("nvidia", "amd")
    for case in (
        Case(f"{Q}.{platform}.model.Qwen4ExpForCausalLM", (("model", f"{Q}.{platform}.model.Qwen4ExpModel"),),
             HyperLayer, None, decoder_wiring=HYPER),
        Case(f"{Q}.{platform}.model.Qwen4ExpForConditionalGeneration",
             (("language_model", f"{Q}.{platform}.model.Qwen4ExpForCausalLM"),
              ("model", f"{Q}.{platform}.model.Qwen4ExpModel")),
             HyperLayer, None, outer_wiring={"deepstack_num_level": 0}, decoder_wiring=HYPER),
    )
]
CASES = [
    Case(f"{M}.mimo.MiMoForCausalLM", (("model", f"{M}.mimo.MiMoModel"),), norm=None),
    Case(f"{M}.exaone4.Exaone4ForCausalLM", (("model", f"{M}.exaone4.Exaone4Model"),), WholeLayer),
    Case(f"{M}.exaone4_5.Exaone4_5_ForConditionalGeneration",
         (("language_model", f"{M}.exaone4.Exaone4ForCausalLM"), ("model", f"{M}.exaone4.Exaone4Model")), WholeLayer),
    Case(f"{M}.cohere_compass.CohereCompassForConditionalGeneration",
         (("language_model", f"{M}.cohere_compass.CohereCompassForCausalLM"),
          ("model", f"{M}.cohere_compass.CohereCompassTextModel")), WholeLayer, IgnoringNorm,
         outer_wiring={"deepstack_num_level": 0}),
    Case(f"{M}.granite4_vision.Granite4VisionForConditionalGeneration",
         (("language_model", f"{M}.granite4_vision.Granite4VisionLLMForCausalLM"),
          ("model", f"{M}.granite4_vision.Granite4VisionLLMModel")), SingleLayer,
         outer_wiring={"_ds_layer_indices": [], "_ds_num_tokens": 0}),
    *QWEN4_CASES,
]


def build(case: Case):
    """The real outer class over real intermediate modules down to the real decoder with stand-in layers."""
    chain = real_chain(case.outer, case.path)
    outer, decoder = chain[0], chain[-1]
    wiring = [(outer, case.outer_wiring)] + ([(decoder, case.decoder_wiring)] if case.path else [])
    for instance, attributes in wiring:
        for name, value in attributes.items():
            setattr(instance, name, value)
    decoder.layers = torch.nn.ModuleList(case.layer() for _ in range(LAYERS))
    decoder.start_layer, decoder.end_layer = 0, LAYERS
    if case.norm is not None:
        decoder.norm = case.norm()
    if case.layer is HyperLayer:
        decoder.hyper_connection_mixer = StreamCombine()
    return outer, decoder


def expected_state(embeds: torch.Tensor, case: Case, after: int) -> torch.Tensor:
    """The residual stream after `after` layers, computed by hand for the stand-ins."""
    if case.layer is HyperLayer:
        # Both streams start as the embedding; stream s gains INJECT[s] per layer; the streams are averaged.
        return embeds + after * sum(INJECT) / HC
    return embeds + after


@pytest.fixture(autouse=True)
def single_rank(monkeypatch):
    one_pipeline_rank(monkeypatch)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_real_forward_returns_exactly_the_chosen_aux_states(case):
    from vllm.model_executor.models.interfaces import supports_eagle3

    outer, decoder = build(case)
    assert supports_eagle3(outer)
    outer.set_aux_hidden_state_layers(CHOSEN)
    assert decoder.aux_hidden_state_layers == CHOSEN
    embeds = torch.randn(TOKENS, HIDDEN)
    with torch.no_grad():
        out = outer.forward(input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=embeds)
    assert_aux_states(out, CHOSEN, LAYERS, lambda layer: expected_state(embeds, case, layer), case.id)


@pytest.mark.parametrize("case", [CASES[0], QWEN4_CASES[0]], ids=lambda c: c.id)
def test_without_aux_layers_the_output_is_unchanged(case):
    outer, _ = build(case)
    embeds = torch.randn(TOKENS, HIDDEN)
    with torch.no_grad():
        out = outer.forward(input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=embeds)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, expected_state(embeds, case, LAYERS))


def test_the_hyper_connection_expectation_is_the_stream_mean_not_one_stream():
    # After 3 layers, stream 0 holds x + 3 and stream 1 holds x + 9: the recorded state is their mean x + 6.
    x = torch.zeros(1, HIDDEN)
    assert expected_state(x, QWEN4_CASES[0], 3).unique().tolist() == [6.0]
