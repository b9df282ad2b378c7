# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in GLM-4.7 and GLM-4.7-Flash.

The decoder must record the residual stream entering the chosen layers. It runs
its real forward over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py):
a real layer needs an attention backend and kernels the CPU test job lacks, and
the stand-ins make a wrong record change the numbers.
"""

import pytest

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_records_aux_states


@pytest.mark.parametrize(
    "decoder", ["glm4_moe.Glm4MoeModel", "glm4_moe_lite.Glm4MoeLiteModel"]
)
def test_decoder_records_aux_hidden_states(decoder, monkeypatch):
    assert_decoder_records_aux_states(decoder, monkeypatch)
