# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE3 aux hidden-state capture in Cohere / Cohere2 (Command R, R7B, A).

Each outer class must declare SupportsEagle3 and its decoder must record the
residual stream entering the chosen layers. The decoder runs its real forward
with stand-in layers that add one to the stream, so the state entering layer i
is the input plus i.
"""

import importlib
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from vllm.model_executor.models.interfaces import (
    EagleModelMixin,
    supports_eagle3,
)

NUM_LAYERS = 6
AUX_LAYERS = (0, 2, 6)

# architecture -> (outer class, decoder class, how a layer hands the stream back)
# "split": (hidden, residual) whose sum is the stream (fused add + norm);
# "whole": hidden is already the stream (parallel or un-fused blocks);
# "single": the layer returns the stream alone.
CASES = {
    "CohereForCausalLM": (
        "commandr.CohereForCausalLM",
        "commandr.CohereModel",
        "whole",
    ),
}


class _StreamLayer(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, *args, **kwargs):
        tensors = [
            a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]
        hidden = kwargs.get("hidden_states", tensors[0] if tensors else None)
        residual = kwargs.get("residual", tensors[1] if len(tensors) > 1 else None)
        if self.kind == "split":
            stream = hidden if residual is None else hidden + residual
            return torch.ones_like(hidden), stream
        if self.kind == "whole":
            return hidden + 1, hidden * 100
        return hidden + 1


class _Norm(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, hidden, residual=None):
        if residual is None:
            return hidden
        if self.kind == "whole":  # the residual is not part of the stream
            return hidden, residual
        return hidden + residual, hidden + residual


def _load(path: str) -> type:
    module_name, _, class_name = path.rpartition(".")
    module = importlib.import_module(f"vllm.model_executor.models.{module_name}")
    return getattr(module, class_name)


def _decoder(path: str, kind: str) -> nn.Module:
    decoder = object.__new__(_load(path))
    nn.Module.__init__(decoder)
    decoder.do_not_compile = True
    decoder.layers = nn.ModuleList(_StreamLayer(kind) for _ in range(NUM_LAYERS))
    decoder.start_layer, decoder.end_layer = 0, NUM_LAYERS
    decoder.norm = decoder.final_layernorm = decoder.embedding_norm = _Norm(kind)
    decoder.embedding_multiplier = 1.0
    decoder.config = SimpleNamespace(embedding_multiplier=1.0)
    return decoder


@pytest.fixture(autouse=True)
def _single_pp_rank(monkeypatch):
    from vllm.distributed import parallel_state

    rank = SimpleNamespace(is_first_rank=True, is_last_rank=True, world_size=1)
    monkeypatch.setattr(parallel_state, "_PP", rank)


@pytest.mark.parametrize("arch", sorted(CASES))
def test_decoder_captures_aux_hidden_states(arch):
    outer, path, kind = CASES[arch]
    assert supports_eagle3(_load(outer)), f"{arch} does not declare SupportsEagle3"

    decoder = _decoder(path, kind)
    assert isinstance(decoder, EagleModelMixin)
    decoder._set_aux_hidden_state_layers(AUX_LAYERS)

    embeds = torch.randn(3, 4)
    with torch.no_grad():
        # input_ids, positions, intermediate_tensors, inputs_embeds
        out = decoder.forward(None, torch.arange(3), None, embeds)
    assert isinstance(out, tuple), f"{arch}: no aux hidden states returned"
    hidden, aux = out
    torch.testing.assert_close(hidden, embeds + NUM_LAYERS)
    assert len(aux) == len(AUX_LAYERS)
    for layer, state in zip(AUX_LAYERS, aux):
        torch.testing.assert_close(state, embeds + layer)
