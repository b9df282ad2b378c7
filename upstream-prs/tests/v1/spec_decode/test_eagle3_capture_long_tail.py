# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in older architectures (optional).

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers: the decoder runs its real forward
over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py).
"""

import pytest
from torch import nn

from tests.v1.spec_decode.eagle3_capture_utils import (
    AUX_LAYERS,
    NUM_LAYERS,
    assert_decoder_captures,
    bare,
)
from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3

PREFIX = "vllm.model_executor.models."

# architecture -> (outer class, decoder class, the layers' stream contract)
CASES = {
    "Gemma2ForCausalLM": ("gemma2.Gemma2ForCausalLM", "gemma2.Gemma2Model", "split"),
    "OrionForCausalLM": ("orion.OrionForCausalLM", "orion.OrionModel", "single"),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch, monkeypatch):
    assert_decoder_captures(arch, *CASES[arch], monkeypatch)


# Outer classes that keep their decoder outside `.model` override the setter and
# the default layers (Cohere ASR's get_language_model() is the decoder itself):
# architecture -> (outer class, path to the decoder, decoder class, its layers).
OUTER_CASES = {
    "BloomForCausalLM": (
        "bloom.BloomForCausalLM",
        "transformer",
        "bloom.BloomModel",
        "h",
    ),
    "ChatGLMForCausalLM": (
        "chatglm.ChatGLMForCausalLM",
        "transformer.encoder",
        "chatglm.GLMTransformer",
        "layers",
    ),
    "CohereAsrForConditionalGeneration": (
        "cohere_asr.CohereAsrForConditionalGeneration",
        "model.decoder",
        "cohere_asr.CohereASRDecoder",
        "layers",
    ),
    "DbrxForCausalLM": (
        "dbrx.DbrxForCausalLM",
        "transformer",
        "dbrx.DbrxModel",
        "blocks",
    ),
    "ExaoneForCausalLM": (
        "exaone.ExaoneForCausalLM",
        "transformer",
        "exaone.ExaoneModel",
        "h",
    ),
    "FalconForCausalLM": (
        "falcon.FalconForCausalLM",
        "transformer",
        "falcon.FalconModel",
        "h",
    ),
    "GPT2LMHeadModel": ("gpt2.GPT2LMHeadModel", "transformer", "gpt2.GPT2Model", "h"),
    "GPTJForCausalLM": ("gpt_j.GPTJForCausalLM", "transformer", "gpt_j.GPTJModel", "h"),
    "Mamba2ForCausalLM": (
        "mamba2.Mamba2ForCausalLM",
        "backbone",
        "mamba2.Mamba2Model",
        "layers",
    ),
    "Moondream3ForCausalLM": (
        "moondream3.Moondream3ForCausalLM",
        "text",
        "moondream3.Moondream3TextModel",
        "blocks",
    ),
    "NemotronParseForConditionalGeneration": (
        "nemotron_parse.NemotronParseForConditionalGeneration",
        "decoder",
        "nemotron_parse.MBartDecoderNoPos",
        "layers",
    ),
    "OPTForCausalLM": (
        "opt.OPTForCausalLM",
        "model.decoder",
        "opt.OPTDecoder",
        "layers",
    ),
}


@pytest.mark.parametrize("arch", sorted(OUTER_CASES))
def test_outer_class_sets_aux_layers_on_its_decoder(arch):
    outer_path, attr_path, decoder_path, layers = OUTER_CASES[arch]
    outer = bare(PREFIX + outer_path)
    assert isinstance(outer, SupportsEagle3), f"{arch} does not declare SupportsEagle3"
    parent = outer
    *middle, last = attr_path.split(".")
    for attr in middle:
        setattr(parent, attr, nn.Module())
        parent = getattr(parent, attr)
    decoder = bare(PREFIX + decoder_path)
    assert isinstance(decoder, EagleModelMixin)
    setattr(decoder, layers, nn.ModuleList(nn.Identity() for _ in range(NUM_LAYERS)))
    setattr(parent, last, decoder)

    outer.set_aux_hidden_state_layers(AUX_LAYERS)
    assert decoder.aux_hidden_state_layers == AUX_LAYERS
    assert outer.get_eagle3_default_aux_hidden_state_layers() == (2, 3, 3)
