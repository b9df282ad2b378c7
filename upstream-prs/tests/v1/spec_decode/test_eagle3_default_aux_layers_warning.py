# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A warning when an EAGLE3 head names no aux layers and the target's default ones are used."""

import json
import logging
from contextlib import contextmanager

import pytest
from torch import nn

from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3
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


class Decoder(nn.Module, EagleModelMixin):
    def __init__(self, num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Identity() for _ in range(num_layers))


class Target(nn.Module, SupportsEagle3):
    """A target that keeps the protocol's own default layers and setter."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.model = Decoder(num_layers)


class _Warnings(logging.Handler):
    """Keeps the warnings a logger emits."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def warnings_of(logger: logging.Logger):
    handler = _Warnings()
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def test_runner_v2_warns_when_the_head_names_no_layers(target, tmp_path):
    spec = _eagle3(target, tmp_path / "eagle3")
    model = Target(num_layers=8)
    with warnings_of(eagle3_utils.logger) as records:
        eagle3_utils.set_eagle3_aux_hidden_state_layers(model, spec)
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
