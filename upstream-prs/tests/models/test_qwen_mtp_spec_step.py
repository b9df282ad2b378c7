# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Multi-layer Qwen3-Next / Qwen3.5 MTP: each draft step reaches its own MTP layer."""

import logging
from types import SimpleNamespace

import pytest
from transformers import PretrainedConfig

from vllm.config import SpeculativeConfig, VllmConfig
from vllm.config import vllm as vllm_config_module
from vllm.model_executor.models.qwen3_5_mtp import Qwen3_5MTP
from vllm.model_executor.models.qwen3_next_mtp import Qwen3NextMTP


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


def _two_layer_qwen3_5_draft() -> PretrainedConfig:
    config = PretrainedConfig(
        architectures=["Qwen3_5ForCausalLM"], mtp_num_hidden_layers=2
    )
    config.model_type = "qwen3_5_text"
    return SpeculativeConfig.hf_config_override(config)


def test_qwen3_5_rewrite_keeps_the_layer_count_for_multi_module():
    draft = _two_layer_qwen3_5_draft()
    assert draft.model_type == "qwen3_5_mtp" and draft.n_predict == 2
    # use_multi_module_mtp() reads this field from the draft's top-level config.
    assert draft.num_nextn_predict_layers == 2


@pytest.fixture
def qwen3_5_mtp() -> SpeculativeConfig:
    """Method mtp with two draft steps over the real rewritten draft config (the
    draft model itself is not built)."""
    spec = object.__new__(SpeculativeConfig)
    spec.method, spec.num_speculative_tokens = "mtp", 2
    spec.draft_model_config = SimpleNamespace(hf_config=_two_layer_qwen3_5_draft())
    return spec


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
