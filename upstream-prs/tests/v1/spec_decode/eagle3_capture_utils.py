# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Run a decoder's real forward over stand-in layers to check what it records
for EAGLE3.

A stand-in layer adds one to the residual stream and hands it back split in two
(delta, residual), as pre-norm blocks with a fused add + norm do, so the stream
entering layer i is the input plus i. Recording the wrong value (hidden alone,
the stream after instead of before a layer, nothing) changes the numbers.
"""

import importlib
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from vllm.model_executor.models.interfaces import EagleModelMixin

NUM_LAYERS = 6
AUX_LAYERS = (0, 2, 6)


class StreamLayer(nn.Module):
    """A decoder layer that adds one to the stream: returns (delta, stream)."""

    def forward(self, *args, **kwargs):
        tensors = [
            a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else tensors[0]
        residual = kwargs.get("residual", tensors[1] if len(tensors) > 1 else None)
        stream = hidden if residual is None else hidden + residual
        return torch.ones_like(hidden), stream


class StreamNorm(nn.Module):
    """The final fused add + norm without scaling."""

    def forward(self, hidden, residual=None):
        if residual is None:
            return hidden
        return hidden + residual, hidden + residual


def stand_in_decoder(key: str) -> nn.Module:
    """The decoder class `key` (`module.Class` under vllm.model_executor.models)
    without its __init__, which needs a full VllmConfig, over NUM_LAYERS stand-in
    layers."""
    module, _, name = key.rpartition(".")
    cls = getattr(importlib.import_module(f"vllm.model_executor.models.{module}"), name)
    decoder: nn.Module = object.__new__(cls)
    nn.Module.__init__(decoder)
    decoder.do_not_compile = True
    decoder.layers = nn.ModuleList(StreamLayer() for _ in range(NUM_LAYERS))
    decoder.start_layer, decoder.end_layer = 0, NUM_LAYERS
    decoder.norm = StreamNorm()
    assert isinstance(decoder, EagleModelMixin), f"{key} is no EagleModelMixin"
    decoder._set_aux_hidden_state_layers(AUX_LAYERS)
    return decoder


def assert_decoder_records_aux_states(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoder records the stream entering each of AUX_LAYERS (NUM_LAYERS:
    the output of the last layer)."""
    # One pipeline rank, as on a single GPU: forward asks the PP group about it.
    from vllm.distributed import parallel_state

    monkeypatch.setattr(
        parallel_state,
        "_PP",
        SimpleNamespace(
            is_first_rank=True, is_last_rank=True, world_size=1, rank_in_group=0
        ),
    )
    decoder = stand_in_decoder(key)
    embeds = torch.randn(3, 4)
    with torch.no_grad():
        # input_ids, positions, intermediate_tensors, inputs_embeds
        out = decoder.forward(None, torch.arange(3), None, embeds)
    assert isinstance(out, tuple), f"{key}: no aux hidden states returned"
    hidden, aux = out
    torch.testing.assert_close(hidden, embeds + NUM_LAYERS)
    assert len(aux) == len(AUX_LAYERS)
    for layer, state in zip(AUX_LAYERS, aux):
        torch.testing.assert_close(state, embeds + layer)
