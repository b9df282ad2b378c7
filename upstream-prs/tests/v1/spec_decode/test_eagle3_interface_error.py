# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The EAGLE3 interface error names the model class."""

import json

import pytest
from torch import nn

from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import (
    set_eagle3_aux_hidden_state_layers,
)

# A tiny Llama target and a one-layer EAGLE3 head over it (configs only).
LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "torch_dtype": "bfloat16",
}


@pytest.fixture(scope="module")
def eagle3(tmp_path_factory) -> SpeculativeConfig:
    paths = {}
    for name, config in {
        "target": LLAMA,
        "eagle3": LLAMA
        | {"num_hidden_layers": 1, "architectures": ["Eagle3LlamaForCausalLM"]},
    }.items():
        paths[name] = tmp_path_factory.mktemp(name)
        (paths[name] / "config.json").write_text(json.dumps(config))
    target = ModelConfig(
        model=str(paths["target"]), skip_tokenizer_init=True, max_model_len=1024
    )
    return SpeculativeConfig(
        method="eagle3",
        model=str(paths["eagle3"]),
        num_speculative_tokens=2,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )


class ModelWithoutEagle3(nn.Module):
    pass


def test_error_names_the_model_class(eagle3):
    with pytest.raises(RuntimeError) as error:
        set_eagle3_aux_hidden_state_layers(ModelWithoutEagle3(), eagle3)
    assert "ModelWithoutEagle3 does not implement SupportsEagle3" in str(error.value)
