# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Qwen2-Audio declares SupportsEagle3."""

from vllm.model_executor.models.interfaces import supports_eagle3
from vllm.model_executor.models.qwen2_audio import Qwen2AudioForConditionalGeneration


def test_qwen2_audio_declares_supports_eagle3():
    assert supports_eagle3(Qwen2AudioForConditionalGeneration), (
        "Qwen2AudioForConditionalGeneration lacks SupportsEagle3"
    )
