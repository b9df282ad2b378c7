# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux layer ids: both model runners read the same ids, and warn on defaults."""

import json
import logging
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from torch import nn

from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3
from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.gpu_model_runner import logger as v1_logger

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


class Decoder(nn.Module, EagleModelMixin):
    def __init__(self, num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Identity() for _ in range(num_layers))


class Target(nn.Module, SupportsEagle3):
    """A target that keeps the protocol's own default layers and setter."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.model = Decoder(num_layers)


@contextmanager
def warnings_of(logger: logging.Logger):
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def test_runner_v2_reads_eagle_config_ids_like_runner_v1(target, tmp_path):
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}}
    spec = _eagle3(target, tmp_path / "eagle3", **nested)
    runner_v1 = SimpleNamespace(speculative_config=spec)
    assert GPUModelRunner._get_eagle3_aux_layers_from_config(runner_v1) == (1, 3, 5)
    assert eagle3_utils.get_eagle3_aux_layers_from_config(spec) == (1, 3, 5)


def test_runner_v2_warns_when_the_head_names_no_layers(target, tmp_path):
    spec = _eagle3(target, tmp_path / "eagle3")
    model = Target(num_layers=8)
    with warnings_of(eagle3_utils.logger) as records:
        eagle3_utils.set_eagle3_aux_hidden_state_layers(model, spec)
    assert model.model.aux_hidden_state_layers == (2, 4, 5)
    [warning] = [r.getMessage() for r in records]
    assert "eagle_aux_hidden_state_layer_ids" in warning and "(2, 4, 5)" in warning


def test_runner_v1_warns_when_the_head_names_no_layers(target, tmp_path):
    spec = _eagle3(target, tmp_path / "eagle3")
    model = Target(num_layers=8)
    runner = SimpleNamespace(
        use_aux_hidden_state_outputs=True,
        speculative_config=spec,
        model=model,
        get_model=lambda: model,
    )
    runner._get_eagle3_aux_layers_from_config = (
        lambda: GPUModelRunner._get_eagle3_aux_layers_from_config(runner)
    )
    with warnings_of(v1_logger) as records:
        GPUModelRunner._setup_eagle3_aux_hidden_state_outputs(runner)
    assert model.model.aux_hidden_state_layers == (2, 4, 5)
    [warning] = [r.getMessage() for r in records]
    assert "eagle_aux_hidden_state_layer_ids" in warning and "(2, 4, 5)" in warning


def test_no_warning_when_the_head_names_its_layers(target, tmp_path):
    spec = _eagle3(target, tmp_path / "eagle3", eagle_aux_hidden_state_layer_ids=[1, 3])
    model = Target(num_layers=8)
    with warnings_of(eagle3_utils.logger) as records:
        eagle3_utils.set_eagle3_aux_hidden_state_layers(model, spec)
    assert model.model.aux_hidden_state_layers == (1, 3)
    assert records == []
