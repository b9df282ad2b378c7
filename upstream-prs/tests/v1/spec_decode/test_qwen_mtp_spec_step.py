# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Multi-layer Qwen3-Next / Qwen3.5 MTP: each draft step reaches its own MTP layer."""

import json
import logging
from types import SimpleNamespace

import pytest

from vllm.config import (
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.config import vllm as vllm_config_module
from vllm.model_executor.models.qwen3_5_mtp import Qwen3_5MTP
from vllm.model_executor.models.qwen3_next_mtp import Qwen3NextMTP

# A tiny text-only Qwen3.5 checkpoint with two MTP layers (config only: no
# weights load, the draft config is rewritten from it).
QWEN3_5 = {
    "model_type": "qwen3_5_text",
    "architectures": ["Qwen3_5ForCausalLM"],
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "mtp_num_hidden_layers": 2,
    "max_position_embeddings": 1024,
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


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> ModelConfig:
    path = tmp_path_factory.mktemp("qwen3_5")
    (path / "config.json").write_text(json.dumps(QWEN3_5))
    return ModelConfig(model=str(path), skip_tokenizer_init=True, max_model_len=1024)


@pytest.fixture(scope="module")
def qwen3_5_mtp(target) -> SpeculativeConfig:
    """Method mtp with two draft steps: the draft is the target's rewritten config."""
    return SpeculativeConfig(
        method="mtp",
        num_speculative_tokens=2,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )


def test_qwen3_5_rewrite_keeps_the_layer_count_for_multi_module(qwen3_5_mtp):
    draft = qwen3_5_mtp.draft_model_config.hf_config
    assert draft.model_type == "qwen3_5_mtp" and draft.n_predict == 2
    # use_multi_module_mtp() reads this field from the draft's top-level config.
    assert draft.num_nextn_predict_layers == 2


def test_two_layer_qwen3_5_takes_the_multi_module_speculator(qwen3_5_mtp):
    assert qwen3_5_mtp.use_multi_module_mtp()


class _Warnings(logging.Handler):
    """Keeps the warnings a logger emits."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_model_runner_v1_says_it_drafts_with_the_first_layer(
    target, qwen3_5_mtp, monkeypatch
):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    handler = _Warnings()
    vllm_config_module.logger.addHandler(handler)
    try:
        config = VllmConfig(
            model_config=target,
            speculative_config=qwen3_5_mtp,
            device_config=DeviceConfig(device="cpu"),
        )
    finally:
        vllm_config_module.logger.removeHandler(handler)
    assert not config.use_v2_model_runner
    messages = [r.getMessage() for r in handler.records]
    assert any("first of the 2 MTP layers" in m for m in messages)
