# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Qwen2-Audio declares SupportsEagle3.

Its language model is a Qwen2ForCausalLM, whose Qwen2Model already records aux
hidden states, and its forward returns that output unchanged, so EAGLE3-family
drafters only need the declaration.
"""

from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3
from vllm.model_executor.models.qwen2 import Qwen2Model
from vllm.model_executor.models.qwen2_audio import Qwen2AudioForConditionalGeneration


def test_qwen2_audio_declares_supports_eagle3():
    # The declaration is sound only because the decoder records the states.
    assert issubclass(Qwen2Model, EagleModelMixin)
    assert supports_eagle3(Qwen2AudioForConditionalGeneration), (
        "Qwen2AudioForConditionalGeneration lacks SupportsEagle3"
    )
