# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in Step-3 and Step-3.5.

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers: the decoder runs its real forward
over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py).
"""

import pytest

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_captures

# architecture -> (outer class, decoder class, the layers' stream contract)
CASES = {
    "Step3TextForCausalLM": (
        "step3_text.Step3TextForCausalLM",
        "step3_text.Step3TextModel",
        "split",
    ),
    "Step3p5ForCausalLM": (
        "step3p5.Step3p5ForCausalLM",
        "step3p5.Step3p5Model",
        "single",
    ),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch, monkeypatch):
    assert_decoder_captures(arch, *CASES[arch], monkeypatch)
