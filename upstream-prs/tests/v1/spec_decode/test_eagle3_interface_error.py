# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The EAGLE3 interface error names the model class, the method and a way out."""

from types import SimpleNamespace

import pytest
from torch import nn

from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import (
    set_eagle3_aux_hidden_state_layers,
)
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class ModelWithoutEagle3(nn.Module):
    pass


def _check(message: str, method: str) -> None:
    assert message.startswith("Model does not support EAGLE3 interface")
    assert f"{__name__}.ModelWithoutEagle3 does not declare SupportsEagle3" in message
    assert f"speculative method '{method}'" in message
    assert "'ngram'" in message and "'draft_model'" in message


def test_model_runner_v2_error():
    spec_config = SimpleNamespace(method="dflash")
    with pytest.raises(RuntimeError) as error:
        set_eagle3_aux_hidden_state_layers(ModelWithoutEagle3(), spec_config)
    _check(str(error.value), "dflash")


def test_model_runner_v1_error():
    model = ModelWithoutEagle3()
    runner = SimpleNamespace(
        use_aux_hidden_state_outputs=True,
        get_model=lambda: model,
        speculative_config=SimpleNamespace(method="eagle3"),
    )
    with pytest.raises(RuntimeError) as error:
        GPUModelRunner._setup_eagle3_aux_hidden_state_outputs(runner)
    _check(str(error.value), "eagle3")
