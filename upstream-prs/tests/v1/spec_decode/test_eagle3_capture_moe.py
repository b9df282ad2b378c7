# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in Mixtral, Qwen2-MoE, OLMoE and Phi-3.5-MoE.

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers: the decoder runs its real forward
over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py).
"""

import pytest

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_captures

# architecture -> (outer class, decoder class, the layers' stream contract)
CASES = {
    "MixtralForCausalLM": (
        "mixtral.MixtralForCausalLM",
        "mixtral.MixtralModel",
        "split",
    ),
    "Qwen2MoeForCausalLM": (
        "qwen2_moe.Qwen2MoeForCausalLM",
        "qwen2_moe.Qwen2MoeModel",
        "split",
    ),
    "PhiMoEForCausalLM": ("phimoe.PhiMoEForCausalLM", "phimoe.PhiMoEModel", "whole"),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch, monkeypatch):
    assert_decoder_captures(arch, *CASES[arch], monkeypatch)
