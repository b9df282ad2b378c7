"""Decoders kept outside `.model` (GPT-2, Falcon, OPT, Mamba-2, ChatGLM, Nemotron-Parse, ...) capture under the outer.

The protocol's default setter and default layers look for the decoder at `.model`; these outer classes keep it
elsewhere (`.transformer`, `.backbone`, `.decoder`, `.model.decoder`, `.transformer.encoder`) and override both
(Cohere ASR needs no override: its get_language_model() is the decoder).
Each outer class and every module down to the decoder is the real class, built without its __init__ and wired as
the constructor would; the layers, norms and embedding extras (GPT-2's and OPT's position embeddings, BLOOM's and
Nemotron-Parse's embedding norms) are stand-ins with known values, so the expected stream is computed by hand: the
embedding after those extras, plus one per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from fork_testing import assert_aux_states, one_pipeline_rank, real_chain

HIDDEN, TOKENS, LAYERS = 8, 5, 6
CHOSEN = (0, 2, 3, 6)  # the stream entering the first layer, two inner layers, the output of the last layer
POSITION_SHIFT = 10.0  # GPT-2's stand-in position embedding adds this to every token
M = "vllm.model_executor.models"


class WholeLayer(torch.nn.Module):
    """A block that adds its own residual and returns the whole stream (plus one); `at`: the stream argument."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def forward(self, *args, **kwargs):
        for name in ("hidden_states", "decoder_hidden_states"):
            if name in kwargs:
                return kwargs[name] + 1
        return args[self.at] + 1


class SplitLayer(torch.nn.Module):
    """EXAONE's contract: the stream is hidden + residual; returns (delta of one, the stream so far)."""

    def forward(self, positions, hidden_states, residual):
        stream = hidden_states if residual is None else hidden_states + residual
        return torch.ones_like(stream), stream


class Norm(torch.nn.Module):
    """A final norm without scaling; with a residual it is fused: (hidden + residual, hidden + residual)."""

    def forward(self, hidden, residual=None):
        return hidden if residual is None else (hidden + residual, hidden + residual)


class Shift(torch.nn.Module):
    """GPT-2's position embedding stand-in: a constant per token."""

    def forward(self, positions):
        return torch.full((positions.shape[0], HIDDEN), POSITION_SHIFT)


class Double(torch.nn.Module):
    """BLOOM's embedding norm stand-in."""

    def forward(self, hidden):
        return hidden * 2


class Given(torch.nn.Module):
    """A token embedding its decoder calls itself (Nemotron-Parse, Cohere ASR): the test's embeddings, for any ids."""

    value: torch.Tensor | None = None

    def forward(self, input_ids, *positions):
        return self.value


@dataclass(frozen=True)
class Case:
    """Outer class, path to the decoder, its layer list and final-norm names, a layer factory and extra wiring."""

    outer: str
    path: tuple[tuple[str, str], ...]
    layers: str
    norm: str
    layer: type | int = 1  # an int: WholeLayer reading the stream at that position
    wiring: dict = field(default_factory=dict)
    entry: object = staticmethod(lambda embeds: embeds)  # the stream entering layer 0, by hand

    @property
    def id(self) -> str:
        return self.outer.rpartition(".")[2]


def _transformer(module: str, outer: str, decoder: str, layers: str, norm: str, **kw) -> Case:
    return Case(f"{M}.{module}.{outer}", (("transformer", f"{M}.{module}.{decoder}"),), layers, norm, **kw)


CASES = [
    _transformer("gpt2", "GPT2LMHeadModel", "GPT2Model", "h", "ln_f", layer=0, wiring={"wpe": Shift()},
                 entry=lambda embeds: embeds + POSITION_SHIFT),
    _transformer("gpt_j", "GPTJForCausalLM", "GPTJModel", "h", "ln_f"),
    _transformer("dbrx", "DbrxForCausalLM", "DbrxModel", "blocks", "norm_f"),
    _transformer("exaone", "ExaoneForCausalLM", "ExaoneModel", "h", "ln_f", layer=SplitLayer),
    _transformer("falcon", "FalconForCausalLM", "FalconModel", "h", "ln_f"),
    _transformer("bloom", "BloomForCausalLM", "BloomModel", "h", "ln_f", wiring={"word_embeddings_layernorm": Double()},
                 entry=lambda embeds: embeds * 2),
    # OPT: the decoder sits under OPTModel; learned position embeddings are added before the first layer.
    Case(f"{M}.opt.OPTForCausalLM", (("model", f"{M}.opt.OPTModel"), ("decoder", f"{M}.opt.OPTDecoder")), "layers",
         "final_layer_norm", layer=0, wiring={"embed_positions": Shift(), "project_in": None, "project_out": None},
         entry=lambda embeds: embeds + POSITION_SHIFT),
    # Mamba-2: the layers take keywords and keep the stream split in two (fused add + norm), like EXAONE's.
    Case(f"{M}.mamba2.Mamba2ForCausalLM", (("backbone", f"{M}.mamba2.Mamba2Model"),), "layers", "norm_f",
         layer=SplitLayer),
    # Nemotron-Parse: an encoder-decoder whose MBart decoder embeds the token ids itself and normalises them first.
    Case(f"{M}.nemotron_parse.NemotronParseForConditionalGeneration",
         (("decoder", f"{M}.nemotron_parse.MBartDecoderNoPos"),), "layers", "layer_norm",
         wiring={"embed_tokens": Given(), "layernorm_embedding": Double()}, entry=lambda embeds: embeds * 2),
    # Cohere ASR: get_language_model() is the decoder itself, so the protocol's own setter reaches it.
    Case(f"{M}.cohere_asr.CohereAsrForConditionalGeneration",
         (("model", f"{M}.cohere_asr.CohereASRModel"), ("decoder", f"{M}.cohere_asr.CohereASRDecoder")), "layers",
         "final_layer_norm", layer=0, wiring={"embedding": Given()}),
    # Moondream 3: get_language_model() is the text model (default setter); its blocks are not `.layers`.
    Case(f"{M}.moondream3.Moondream3ForCausalLM", (("text", f"{M}.moondream3.Moondream3TextModel"),), "blocks",
         "post_ln"),
    Case(f"{M}.chatglm.ChatGLMForCausalLM",
         (("transformer", f"{M}.chatglm.ChatGLMModel"), ("encoder", f"{M}.chatglm.GLMTransformer")),
         "layers", "final_layernorm", wiring={"post_layer_norm": True}),
]


def build(case: Case):
    """The real outer class over the real modules down to the real decoder, with stand-in layers and norm."""
    chain = real_chain(case.outer, case.path)
    outer, decoder = chain[0], chain[-1]
    make = (lambda: WholeLayer(case.layer)) if isinstance(case.layer, int) else case.layer
    setattr(decoder, case.layers, torch.nn.ModuleList(make() for _ in range(LAYERS)))
    decoder.start_layer, decoder.end_layer = 0, LAYERS
    setattr(decoder, case.norm, Norm())
    for name, value in case.wiring.items():
        setattr(decoder, name, value)
    return outer, decoder


@pytest.fixture(autouse=True)
def single_rank(monkeypatch):
    one_pipeline_rank(monkeypatch)


def _forward(outer, decoder):
    embeds = torch.randn(TOKENS, HIDDEN)
    for given in (m for m in decoder.children() if isinstance(m, Given)):
        given.value = embeds
    with torch.no_grad():
        return embeds, outer.forward(input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=embeds)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_outer_setter_reaches_the_decoder_and_forward_returns_the_chosen_states(case):
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

    outer, decoder = build(case)
    assert supports_eagle3(outer) and isinstance(decoder, EagleModelMixin)
    outer.set_aux_hidden_state_layers(CHOSEN)
    assert decoder.aux_hidden_state_layers == CHOSEN
    embeds, out = _forward(outer, decoder)
    assert_aux_states(out, CHOSEN, LAYERS, lambda layer: case.entry(embeds) + layer, case.id)
    # The default layers count the decoder's own layer list: (2, half, last - 3).
    assert outer.get_eagle3_default_aux_hidden_state_layers() == (2, LAYERS // 2, LAYERS - 3)


@pytest.mark.parametrize("case", [CASES[0], CASES[-1]], ids=lambda c: c.id)
def test_without_aux_layers_the_outer_forward_returns_a_plain_tensor(case):
    outer, decoder = build(case)
    embeds, out = _forward(outer, decoder)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, case.entry(embeds) + LAYERS)


def test_the_default_setter_of_the_protocol_cannot_reach_a_transformer_decoder():
    # Why the overrides exist: the protocol's own setter asserts on the outer class when the decoder is not `.model`.
    from vllm.model_executor.models.interfaces import SupportsEagle3

    outer, _ = build(CASES[0])
    with pytest.raises(AssertionError, match="EagleModelMixin"):
        SupportsEagle3.set_aux_hidden_state_layers(outer, CHOSEN)
