# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in Falcon-H1, LFM2, LFM2-MoE and OLMo-hybrid.

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers: the decoder runs its real forward
over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py).
"""

import pytest

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_captures

# architecture -> (outer class, decoder class, the layers' stream contract)
CASES = {
    "FalconH1ForCausalLM": (
        "falcon_h1.FalconH1ForCausalLM",
        "falcon_h1.FalconH1Model",
        "single",
    ),
    "Lfm2ForCausalLM": ("lfm2.Lfm2ForCausalLM", "lfm2.Lfm2Model", "split"),
    "Lfm2MoeForCausalLM": (
        "lfm2_moe.Lfm2MoeForCausalLM",
        "lfm2_moe.Lfm2MoeModel",
        "split",
    ),
    "OlmoHybridForCausalLM": (
        "olmo_hybrid.OlmoHybridForCausalLM",
        "olmo_hybrid.OlmoHybridModel",
        "single",
    ),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch, monkeypatch):
    assert_decoder_captures(arch, *CASES[arch], monkeypatch)
