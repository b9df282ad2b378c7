# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Model Runner V1 refuses speculative decoding with pipeline parallelism early."""

import json

import pytest

from vllm.config import (
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    VllmConfig,
)

TARGET = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> ModelConfig:
    path = tmp_path_factory.mktemp("target") / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(TARGET))
    return ModelConfig(model=str(path), skip_tokenizer_init=True, max_model_len=1024)


def _config(target: ModelConfig, pipeline_parallel_size: int) -> VllmConfig:
    parallel = ParallelConfig(pipeline_parallel_size=pipeline_parallel_size)
    return VllmConfig(
        model_config=target,
        device_config=DeviceConfig(device="cpu"),
        parallel_config=parallel,
        speculative_config=SpeculativeConfig(
            method="ngram",
            num_speculative_tokens=3,
            prompt_lookup_max=3,
            target_model_config=target,
            target_parallel_config=parallel,
        ),
    )


def test_refused_with_the_issue_and_the_way_out(target, monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    with pytest.raises(ValueError) as error:
        _config(target, pipeline_parallel_size=2)
    message = str(error.value)
    expected = "Model Runner V1 does not support: speculative decoding with pipeline"
    assert expected in message
    assert "#30436" in message and "VLLM_USE_V2_MODEL_RUNNER=1" in message


def test_one_stage_still_speculates_on_model_runner_v1(target, monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    assert not _config(target, pipeline_parallel_size=1).use_v2_model_runner
