# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Multi-layer Qwen3-Next / Qwen3.5 MTP: each draft step reaches its own MTP layer."""

import json
import logging
from types import SimpleNamespace

import pytest
from transformers import PretrainedConfig

from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig, VllmConfig
from vllm.config import vllm as vllm_config_module
from vllm.model_executor.models.qwen3_5_mtp import Qwen3_5MTP
from vllm.model_executor.models.qwen3_next_mtp import Qwen3NextMTP

QWEN3_5_TEXT = {
    "model_type": "qwen3_5_text",
    "architectures": ["Qwen3_5ForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 32,
    "linear_value_head_dim": 32,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "mtp_num_hidden_layers": 2,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize("wrapper", [Qwen3NextMTP, Qwen3_5MTP])
def test_wrapper_hands_the_step_to_its_predictor(wrapper):
    seen: dict = {}

    def predictor(*args, **kwargs):
        seen.update(kwargs)
        return "hidden"

    out = wrapper.forward(
        SimpleNamespace(model=predictor), None, None, None, spec_step_idx=1
    )
    assert out == "hidden"
    assert seen.get("spec_step_idx") == 1


def test_qwen3_5_rewrite_keeps_the_layer_count_for_multi_module():
    config = PretrainedConfig(
        architectures=["Qwen3_5ForCausalLM"], mtp_num_hidden_layers=2
    )
    config.model_type = "qwen3_5_text"
    draft = SpeculativeConfig.hf_config_override(config)
    assert draft.model_type == "qwen3_5_mtp" and draft.n_predict == 2
    # use_multi_module_mtp() reads this field from the draft's top-level config.
    assert draft.num_nextn_predict_layers == 2


@pytest.fixture(scope="module")
def qwen3_5_mtp(tmp_path_factory) -> SpeculativeConfig:
    path = tmp_path_factory.mktemp("qwen3_5") / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(QWEN3_5_TEXT))
    target = ModelConfig(model=str(path), skip_tokenizer_init=True, max_model_len=1024)
    return SpeculativeConfig(
        method="mtp",
        num_speculative_tokens=2,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )


def test_two_layer_qwen3_5_takes_the_multi_module_speculator(qwen3_5_mtp):
    assert qwen3_5_mtp.use_multi_module_mtp()


def test_model_runner_v1_says_it_drafts_with_the_first_layer(qwen3_5_mtp):
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    vllm_config_module.logger.addHandler(handler)
    config = SimpleNamespace(
        speculative_config=qwen3_5_mtp,
        _get_v1_model_runner_unsupported_features=lambda: [],
    )
    try:
        VllmConfig._validate_v1_model_runner(config)
    finally:
        vllm_config_module.logger.removeHandler(handler)
    assert any("first of the 2 MTP layers" in r.getMessage() for r in records)
