# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Run a decoder's real forward over stand-in layers to check what it records
for EAGLE3.

A stand-in layer adds one to the residual stream, so the stream entering layer
i is the input plus i. Each follows one of the layer contracts vLLM's decoders
use, so recording the wrong value (hidden alone where the residual holds part of
the stream, hidden + residual where the layer already returns the whole stream)
changes the numbers:

- "split": the layer returns (delta, residual) whose sum is the stream (pre-norm
  blocks with a fused add + norm);
- "whole": the layer returns the whole stream as hidden and a residual that is
  not part of it (post-norm or parallel blocks);
- "single": the layer returns the stream alone.
"""

import importlib
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

NUM_LAYERS = 6
AUX_LAYERS = (0, 2, 6)


class StreamLayer(nn.Module):
    """A decoder layer that adds one to the stream, handing it back per `kind`."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        tensors = [
            a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]
        hidden: torch.Tensor = kwargs.get(
            "hidden_states", tensors[0] if tensors else None
        )
        residual = kwargs.get("residual", tensors[1] if len(tensors) > 1 else None)
        if self.kind == "split":
            stream = hidden if residual is None else hidden + residual
            return torch.ones_like(hidden), stream
        if self.kind == "whole":
            return hidden + 1, hidden * 100
        return hidden + 1


class StreamNorm(nn.Module):
    """A final norm without scaling: a fused add + norm ("split"), or one that
    leaves a residual that is not part of the stream untouched ("whole")."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(
        self, hidden: torch.Tensor, residual: torch.Tensor | None = None
    ) -> Any:
        if residual is None:
            return hidden
        if self.kind == "whole":
            return hidden, residual
        return hidden + residual, hidden + residual


def load_class(key: str) -> type:
    """The class `package.module.Class`."""
    module, _, name = key.rpartition(".")
    return getattr(importlib.import_module(module), name)


def bare(key: str) -> nn.Module:
    """An instance of the module class `key` without its __init__ (which needs
    a full VllmConfig), running its forward eagerly."""
    instance: nn.Module = object.__new__(load_class(key))
    nn.Module.__init__(instance)
    instance.do_not_compile = True
    return instance


def single_pp_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """One pipeline rank, as on a single GPU: forward asks the PP group about
    its position."""
    from vllm.distributed import parallel_state

    group = SimpleNamespace(
        is_first_rank=True, is_last_rank=True, world_size=1, rank_in_group=0
    )
    monkeypatch.setattr(parallel_state, "_PP", group)


def stand_in_decoder(key: str, kind: str, aux_layers: tuple[int, ...]) -> nn.Module:
    """The real decoder class `key` with NUM_LAYERS stand-in layers of `kind`,
    recording `aux_layers`."""
    decoder = bare(key)
    decoder.layers = nn.ModuleList(StreamLayer(kind) for _ in range(NUM_LAYERS))
    decoder.start_layer, decoder.end_layer = 0, NUM_LAYERS
    decoder.norm = decoder.final_layernorm = decoder.embedding_norm = StreamNorm(kind)
    decoder.embedding_multiplier = 1.0
    decoder.config = SimpleNamespace(embedding_multiplier=1.0)
    assert isinstance(decoder, EagleModelMixin), f"{key} is no EagleModelMixin"
    decoder._set_aux_hidden_state_layers(aux_layers)
    return decoder


def assert_decoder_captures(
    arch: str, outer: str, decoder_key: str, kind: str, monkeypatch
) -> None:
    """`outer` declares SupportsEagle3 and its decoder records the stream
    entering each of AUX_LAYERS (NUM_LAYERS: the output of the last layer)."""
    prefix = "vllm.model_executor.models."
    assert supports_eagle3(load_class(prefix + outer)), (
        f"{arch} does not declare SupportsEagle3"
    )
    single_pp_rank(monkeypatch)
    decoder = stand_in_decoder(prefix + decoder_key, kind, AUX_LAYERS)

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
