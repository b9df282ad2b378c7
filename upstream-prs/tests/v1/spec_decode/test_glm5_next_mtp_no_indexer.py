# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The GLM-5.3-Flash MTP layer builds without the sparse indexer."""

from types import SimpleNamespace

from torch import nn
from transformers import PreTrainedConfig

from vllm.models.glm5next.common import mtp


class _Recorder(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.kwargs = kwargs


def test_mtp_layer_without_index_topk(monkeypatch):
    # Only the layer's own __init__ runs: its submodules are recorded, not built.
    monkeypatch.setattr(mtp, "RMSNorm", _Recorder)
    monkeypatch.setattr(mtp, "SharedHead", _Recorder)
    monkeypatch.setattr(mtp, "Glm5NextDecoderLayer", _Recorder)
    # transformers' Glm5NextTextConfig requires an int index_topk, so the
    # config without the indexer is a generic one.
    config = PreTrainedConfig.from_dict(
        {"hidden_size": 16, "rms_norm_eps": 1e-6, "index_topk": None}
    )
    vllm_config = SimpleNamespace(
        speculative_config=SimpleNamespace(
            draft_model_config=SimpleNamespace(hf_text_config=config)
        ),
        scheduler_config=SimpleNamespace(max_num_batched_tokens=8),
    )
    layer = mtp.Glm5NextMultiTokenPredictorLayer(vllm_config, "model.layers.4")
    block = layer.mtp_block
    assert isinstance(block, _Recorder)
    assert block.kwargs["topk_indices_buffer"] is None
