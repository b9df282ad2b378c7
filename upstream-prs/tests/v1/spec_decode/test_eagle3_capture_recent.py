# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in recent architectures without a published draft.

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers: the decoder runs its real forward
over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py).
"""

import pytest

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_captures

# architecture -> (outer class, decoder class, the layers' stream contract)
CASES = {
    "HYV3ForCausalLM": ("hy_v3.HYV3ForCausalLM", "hy_v3.HYV3Model", "split"),
    "ExaoneMoeForCausalLM": (
        "exaone_moe.ExaoneMoeForCausalLM",
        "exaone_moe.ExaoneMoeModel",
        "split",
    ),
    "Param2MoEForCausalLM": (
        "param2moe.Param2MoEForCausalLM",
        "param2moe.Param2MoEModel",
        "split",
    ),
    "PanguEmbeddedForCausalLM": (
        "openpangu.PanguEmbeddedForCausalLM",
        "openpangu.OpenPanguModel",
        "split",
    ),
    "PanguUltraMoEForCausalLM": (
        "openpangu.PanguUltraMoEForCausalLM",
        "openpangu.OpenPanguModel",
        "split",
    ),
    "NemotronForCausalLM": (
        "nemotron.NemotronForCausalLM",
        "nemotron.NemotronModel",
        "split",
    ),
    "InternLM2ForCausalLM": (
        "internlm2.InternLM2ForCausalLM",
        "internlm2.InternLM2Model",
        "split",
    ),
    "MolmoForCausalLM": ("molmo.MolmoForCausalLM", "molmo.MolmoModel", "split"),
    "Molmo2ForConditionalGeneration": (
        "molmo2.Molmo2ForConditionalGeneration",
        "molmo2.Molmo2TextModel",
        "split",
    ),
    "HyperCLOVAXForCausalLM": (
        "hyperclovax.HyperCLOVAXForCausalLM",
        "hyperclovax.HyperCLOVAXModel",
        "whole",
    ),
    "Rnj1ForCausalLM": ("rnj1.Rnj1ForCausalLM", "rnj1.Rnj1Model", "split"),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch, monkeypatch):
    assert_decoder_captures(arch, *CASES[arch], monkeypatch)
