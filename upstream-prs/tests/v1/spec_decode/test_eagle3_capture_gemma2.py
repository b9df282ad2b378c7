# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in Gemma-2.

The decoder must record the residual stream entering the chosen layers. It runs
its real forward over stand-in layers (tests/v1/spec_decode/eagle3_capture_utils.py):
a real layer needs an attention backend and kernels the CPU test job lacks, and
the stand-ins make a wrong record change the numbers.
"""

from tests.v1.spec_decode.eagle3_capture_utils import assert_decoder_records_aux_states


def test_decoder_records_aux_hidden_states(monkeypatch):
    assert_decoder_records_aux_states("gemma2.Gemma2Model", monkeypatch)
