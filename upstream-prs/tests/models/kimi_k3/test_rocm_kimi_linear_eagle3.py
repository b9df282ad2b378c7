# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The ROCm/XPU KimiLinearForCausalLM declares SupportsEagle3, as its CUDA twin
has since #52171: text-only Kimi-K3 checkpoints load through it, and their
DSpark/EAGLE3/DFlash drafts need the aux hidden states its KimiLinearModel
already records."""

from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3
from vllm.models.kimi_k3.amd import linear as rocm
from vllm.models.kimi_k3.nvidia import model as cuda


def test_rocm_kimi_linear_declares_supports_eagle3_like_its_cuda_twin():
    assert supports_eagle3(cuda.KimiLinearForCausalLM)
    assert issubclass(rocm.KimiLinearModel, EagleModelMixin)
    assert supports_eagle3(rocm.KimiLinearForCausalLM), (
        "the ROCm/XPU KimiLinearForCausalLM lacks SupportsEagle3"
    )
