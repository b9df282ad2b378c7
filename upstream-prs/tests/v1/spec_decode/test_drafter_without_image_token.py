# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The EAGLE drafter loads over a multimodal target without an image placeholder."""

import pytest
from torch import nn
from transformers import LlamaConfig, Qwen2AudioConfig

from vllm.model_executor.models.interfaces import SupportsMultiModal
from vllm.v1.spec_decode import llm_base_proposer
from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer


class AudioOnlyTarget(nn.Module, SupportsMultiModal):
    """Multimodal with Qwen2-Audio's config, which has no image_token_index."""

    def __init__(self):
        super().__init__()
        self.config = Qwen2AudioConfig()

    def get_language_model(self):
        return self


class _LoadedPastPlaceholder(Exception):
    pass


def test_load_model_without_image_token_index(monkeypatch):
    monkeypatch.setattr(
        llm_base_proposer, "get_layers_from_vllm_config", lambda *args: {}
    )
    draft = nn.Module()
    draft.config = draft_config = LlamaConfig()
    proposer = object.__new__(SpecDecodeBaseProposer)
    proposer.vllm_config = None
    proposer.supports_mm_inputs = False
    monkeypatch.setattr(proposer, "_get_model", lambda: draft)

    def stop(*args, **kwargs):
        raise _LoadedPastPlaceholder

    monkeypatch.setattr(proposer, "_maybe_share_embeddings", stop)
    with pytest.raises(_LoadedPastPlaceholder):
        proposer.load_model(AudioOnlyTarget())
    assert draft_config.image_token_index is None
