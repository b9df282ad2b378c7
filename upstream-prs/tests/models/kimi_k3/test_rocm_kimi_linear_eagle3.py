# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The ROCm/XPU KimiLinearForCausalLM declares SupportsEagle3."""

from vllm.model_executor.models.interfaces import supports_eagle3
from vllm.models.kimi_k3.amd import linear as rocm


def test_rocm_kimi_linear_declares_supports_eagle3():
    assert supports_eagle3(rocm.KimiLinearForCausalLM), (
        "the ROCm/XPU KimiLinearForCausalLM lacks SupportsEagle3"
    )
