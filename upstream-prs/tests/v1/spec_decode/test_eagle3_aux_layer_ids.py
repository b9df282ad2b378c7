# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux layer ids listed under eagle_config are read on Model Runner V2."""

import json

import pytest

from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils

TARGET = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}


def _checkpoint(path, **config) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> ModelConfig:
    path = _checkpoint(tmp_path_factory.mktemp("target") / "model", **TARGET)
    return ModelConfig(model=path, skip_tokenizer_init=True, max_model_len=1024)


def _eagle3(target: ModelConfig, path, **extra) -> SpeculativeConfig:
    draft = TARGET | {
        "num_hidden_layers": 1,
        "architectures": ["Eagle3LlamaForCausalLM"],
        **extra,
    }
    return SpeculativeConfig(
        method="eagle3",
        model=_checkpoint(path, **draft),
        num_speculative_tokens=3,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )


def test_runner_v2_reads_the_ids_under_eagle_config(target, tmp_path):
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}}
    spec = _eagle3(target, tmp_path / "eagle3", **nested)
    assert eagle3_utils.get_eagle3_aux_layers_from_config(spec) == (1, 3, 5)
