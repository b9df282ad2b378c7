# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in Bailing MoE / Ling.

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers: the decoder runs its real forward
over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py).
"""

import pytest

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_captures

# architecture -> (outer class, decoder class, the layers' stream contract)
CASES = {
    "BailingMoeForCausalLM": (
        "bailing_moe.BailingMoeForCausalLM",
        "bailing_moe.BailingMoeModel",
        "split",
    ),
    "BailingMoeV3ForCausalLM": (
        "bailing_moe_v3.BailingMoeV3ForCausalLM",
        "bailing_moe_v3.BailingMoeV3Model",
        "split",
    ),
    # The multimodal wrappers return their Bailing V3 language model's output.
    "BailingMoeV3VLForConditionalGeneration": (
        "bailing_moe_v3_vl.BailingMoeV3VLForConditionalGeneration",
        "bailing_moe_v3.BailingMoeV3Model",
        "split",
    ),
    "MingV3ASRForConditionalGeneration": (
        "ming_v3_asr.MingV3ASRForConditionalGeneration",
        "bailing_moe_v3.BailingMoeV3Model",
        "split",
    ),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch, monkeypatch):
    assert_decoder_captures(arch, *CASES[arch], monkeypatch)
