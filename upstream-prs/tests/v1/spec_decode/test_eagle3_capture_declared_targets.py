# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Targets that declare SupportsEagle3 must hand out the chosen aux hidden states.

MiMo, EXAONE-4.5, CohereCompass and Qwen4Exp declare the protocol (directly or
through the class they extend), but their decoders' forward recorded nothing, so
eagle3/dflash/dspark failed after the weights had loaded. Each outer class and
every module down to its decoder is the real class, wired as its constructor
would wire it; the decoder's layers and final norm are stand-ins that follow the
model's own layer contract, so recording the wrong value (hidden alone where
the residual holds part of the stream, hidden + residual where a post-norm or
parallel block already returns the whole stream, one hyper-connection stream
instead of their mean) changes the numbers.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tests.v1.spec_decode.eagle3_capture_utils import (
    StreamLayer,
    StreamNorm,
    bare,
    single_pp_rank,
)
from vllm.model_executor.models.interfaces import SupportsEagle3


def _chain(outer: str, path) -> list[nn.Module]:
    """The outer class and each (attribute, class) under it, without __init__."""
    chain: list[nn.Module] = []
    for attr, key in [(None, outer), *path]:
        instance = bare(key)
        if chain:
            setattr(chain[-1], attr, instance)
        chain.append(instance)
    return chain


HIDDEN, TOKENS, LAYERS = 8, 5, 6
# The stream entering the first layer, two inner layers, the last layer's output.
CHOSEN = (0, 2, 3, 6)
HC = 2  # Qwen4Exp hyper-connection streams in the stand-in
# Per-stream injection weights of the stand-in combine: stream s gains INJECT[s]
# per layer.
INJECT = (1.0, 3.0)
M = "vllm.model_executor.models"
Q = "vllm.models.qwen4_exp"


class StreamCombine(torch.nn.Module):
    """hc_combine's contract without the kernel: every stream gains the block
    output, scaled per stream."""

    def combine(self, hidden_states, block_output, injection):
        streams = hidden_states.unflatten(-1, (HC, HIDDEN))
        return (streams + block_output.unsqueeze(-2) * injection.unsqueeze(-1)).flatten(
            -2
        )

    def combine_and_mix(self, hidden_states, block_output, injection):
        """The final mixer: completes the pending combine and samples the plain
        stream mean."""
        multi = (
            hidden_states
            if block_output is None
            else self.combine(hidden_states, block_output, injection)
        )
        return multi, multi.unflatten(-1, (HC, HIDDEN)).mean(dim=-2), None


class HyperLayer(torch.nn.Module):
    """Qwen4ExpDecoderLayer's contract: completes the pending combine, defers
    its own (a block output of ones)."""

    def __init__(self):
        super().__init__()
        self.mlp_hyper_connection = StreamCombine()

    def forward(
        self, hidden_states, prev_block_output, prev_injection, positions, **kwargs
    ):
        if prev_block_output is not None:
            hidden_states = self.mlp_hyper_connection.combine(
                hidden_states, prev_block_output, prev_injection
            )
        tokens = hidden_states.shape[0]
        return (
            hidden_states,
            torch.ones(tokens, HIDDEN),
            torch.tensor(INJECT).expand(tokens, HC),
        )


@dataclass(frozen=True)
class Case:
    """An outer class, the path to its decoder (attribute, class), the decoder's
    layer contract (a StreamLayer kind, or "hyper"), final norm and wiring."""

    outer: str
    path: tuple[tuple[str, str], ...]
    layer: str = "split"
    norm: str | None = "split"
    outer_wiring: dict = field(default_factory=dict)
    decoder_wiring: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.outer.removeprefix("vllm.").replace(".", "-")


HYPER = {
    "config": SimpleNamespace(hc_count=HC, hidden_size=HIDDEN),
    "use_hc_sequence_parallel": False,
    "_mtp_hidden_buffer": None,
}
QWEN4_CASES = [
    case
    for platform in ("nvidia", "amd")
    for case in (
        Case(
            f"{Q}.{platform}.model.Qwen4ExpForCausalLM",
            (("model", f"{Q}.{platform}.model.Qwen4ExpModel"),),
            "hyper",
            None,
            decoder_wiring=HYPER,
        ),
        Case(
            f"{Q}.{platform}.model.Qwen4ExpForConditionalGeneration",
            (
                ("language_model", f"{Q}.{platform}.model.Qwen4ExpForCausalLM"),
                ("model", f"{Q}.{platform}.model.Qwen4ExpModel"),
            ),
            "hyper",
            None,
            outer_wiring={"deepstack_num_level": 0},
            decoder_wiring=HYPER,
        ),
    )
]
CASES = [
    Case(f"{M}.mimo.MiMoForCausalLM", (("model", f"{M}.mimo.MiMoModel"),), norm=None),
    Case(
        f"{M}.exaone4.Exaone4ForCausalLM",
        (("model", f"{M}.exaone4.Exaone4Model"),),
        "whole",
    ),
    Case(
        f"{M}.exaone4_5.Exaone4_5_ForConditionalGeneration",
        (
            ("language_model", f"{M}.exaone4.Exaone4ForCausalLM"),
            ("model", f"{M}.exaone4.Exaone4Model"),
        ),
        "whole",
    ),
    Case(
        f"{M}.cohere_compass.CohereCompassForConditionalGeneration",
        (
            ("language_model", f"{M}.cohere_compass.CohereCompassForCausalLM"),
            ("model", f"{M}.cohere_compass.CohereCompassTextModel"),
        ),
        "whole",
        "whole",
        outer_wiring={"deepstack_num_level": 0},
    ),
    *QWEN4_CASES,
]


def build(case: Case) -> tuple[nn.Module, nn.Module]:
    """The real outer class over real intermediate modules down to the real
    decoder with stand-in layers."""
    chain = _chain(case.outer, case.path)
    outer, decoder = chain[0], chain[-1]
    wiring = [(outer, case.outer_wiring)] + (
        [(decoder, case.decoder_wiring)] if case.path else []
    )
    for instance, attributes in wiring:
        for name, value in attributes.items():
            setattr(instance, name, value)
    hyper = case.layer == "hyper"
    decoder.layers = nn.ModuleList(
        HyperLayer() if hyper else StreamLayer(case.layer) for _ in range(LAYERS)
    )
    decoder.start_layer, decoder.end_layer = 0, LAYERS
    if case.norm is not None:
        decoder.norm = StreamNorm(case.norm)
    if hyper:
        decoder.hyper_connection_mixer = StreamCombine()
    return outer, decoder


def expected_state(embeds: torch.Tensor, case: Case, after: int) -> torch.Tensor:
    """The residual stream after `after` layers, computed by hand for the stand-ins."""
    if case.layer == "hyper":
        # Both streams start as the embedding; stream s gains INJECT[s] per
        # layer; the streams are averaged.
        return embeds + after * sum(INJECT) / HC
    return embeds + after


@pytest.fixture(autouse=True)
def single_rank(monkeypatch):
    single_pp_rank(monkeypatch)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_real_forward_returns_exactly_the_chosen_aux_states(case):
    outer, decoder = build(case)
    eagle3_target = outer  # narrowed to the protocol; forward stays the module's
    assert isinstance(eagle3_target, SupportsEagle3)
    eagle3_target.set_aux_hidden_state_layers(CHOSEN)
    assert decoder.aux_hidden_state_layers == CHOSEN
    embeds = torch.randn(TOKENS, HIDDEN)
    with torch.no_grad():
        out = outer.forward(
            input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=embeds
        )
    assert isinstance(out, tuple), f"{case.id}: forward dropped the aux hidden states"
    hidden, aux = out
    torch.testing.assert_close(hidden, expected_state(embeds, case, LAYERS))
    assert len(aux) == len(CHOSEN)
    for layer, state in zip(CHOSEN, aux):
        torch.testing.assert_close(state, expected_state(embeds, case, layer))


@pytest.mark.parametrize("case", [CASES[0], QWEN4_CASES[0]], ids=lambda c: c.id)
def test_without_aux_layers_the_output_is_unchanged(case):
    outer, _ = build(case)
    embeds = torch.randn(TOKENS, HIDDEN)
    with torch.no_grad():
        out = outer.forward(
            input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=embeds
        )
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, expected_state(embeds, case, LAYERS))


def test_the_hyper_connection_expectation_is_the_stream_mean_not_one_stream():
    # After 3 layers, stream 0 holds x + 3 and stream 1 holds x + 9: the
    # recorded state is their mean x + 6.
    x = torch.zeros(1, HIDDEN)
    assert expected_state(x, QWEN4_CASES[0], 3).unique().tolist() == [6.0]
