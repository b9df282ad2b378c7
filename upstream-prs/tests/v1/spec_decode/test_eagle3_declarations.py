# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Models whose language model records aux hidden states declare SupportsEagle3."""

import importlib

import pytest

from vllm.model_executor.models.interfaces import supports_eagle3

# Each decoder below already inherits EagleModelMixin and the outer forward returns
# its output unchanged, so EAGLE3/DFlash/DSpark drafters only need the declaration.
EAGLE3_CAPABLE = [
    (
        "vllm.model_executor.models.audioflamingo3",
        "AudioFlamingo3ForConditionalGeneration",
    ),
    ("vllm.model_executor.models.bagel", "BagelForConditionalGeneration"),
    ("vllm.model_executor.models.cosmos3_edge", "Cosmos3EdgeForConditionalGeneration"),
    ("vllm.model_executor.models.domyn_edge", "DomynEdgeForCausalLM"),
    ("vllm.model_executor.models.dots_ocr", "DotsOCRForCausalLM"),
    ("vllm.model_executor.models.funasr", "FunASRForConditionalGeneration"),
    ("vllm.model_executor.models.funaudiochat", "FunAudioChatForConditionalGeneration"),
    ("vllm.model_executor.models.glm4", "Glm4ForCausalLM"),
    ("vllm.model_executor.models.glmasr", "GlmAsrForConditionalGeneration"),
    ("vllm.model_executor.models.isaac", "IsaacForConditionalGeneration"),
    ("vllm.model_executor.models.kanana_v", "KananaVForConditionalGeneration"),
    (
        "vllm.model_executor.models.llava_onevision2",
        "LlavaOnevision2ForConditionalGeneration",
    ),
    ("vllm.model_executor.models.midashenglm", "MiDashengLMModel"),
    ("vllm.model_executor.models.minicpmo", "MiniCPMO"),
    ("vllm.model_executor.models.minicpmo", "MiniCPMO2_6"),
    ("vllm.model_executor.models.minicpmo", "MiniCPMO4_5"),
    ("vllm.model_executor.models.moss_audio", "MossAudioModel"),
    (
        "vllm.model_executor.models.moss_transcribe_diarize",
        "MossTranscribeDiarizeForConditionalGeneration",
    ),
    ("vllm.model_executor.models.paddleocr_vl", "PaddleOCRVLForConditionalGeneration"),
    ("vllm.model_executor.models.phi3v", "Phi3VForCausalLM"),
    ("vllm.model_executor.models.phi4mm", "Phi4MMForCausalLM"),
    ("vllm.model_executor.models.phi4siglip", "Phi4ForCausalLMV"),
    (
        "vllm.model_executor.models.qwen2_5_omni_thinker",
        "Qwen2_5OmniThinkerForConditionalGeneration",
    ),
    ("vllm.model_executor.models.qwen2_audio", "Qwen2AudioForConditionalGeneration"),
    ("vllm.model_executor.models.qwen2_vl", "Qwen2VLForConditionalGeneration"),
    ("vllm.model_executor.models.qwen3_next", "Qwen3NextForCausalLM"),
    ("vllm.models.kimi_k3.amd.linear", "KimiLinearForCausalLM"),
    ("vllm.models.kimi_k3.nvidia.model", "KimiLinearForCausalLM"),
]


@pytest.mark.parametrize(("module", "cls_name"), EAGLE3_CAPABLE)
def test_declares_supports_eagle3(module: str, cls_name: str):
    model_cls = getattr(importlib.import_module(module), cls_name)
    assert supports_eagle3(model_cls), f"{module}.{cls_name} lacks SupportsEagle3"
