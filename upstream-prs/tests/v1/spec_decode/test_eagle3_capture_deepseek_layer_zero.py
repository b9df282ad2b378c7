# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""DeepseekV2Model records aux layer 0, the embedding output, with no residual yet."""

from types import SimpleNamespace

import torch
from torch import nn

from vllm.distributed import parallel_state
from vllm.model_executor.models.deepseek_v2 import DeepseekV2Model

# The decoder's real forward runs over stand-in layers that each add one to the
# stream and hand it back split in two, as DeepseekV2DecoderLayer's fused
# add + norm does: the stream entering layer i is the embedding plus i, so a
# wrong record changes the numbers. Like the real layer on CUDA, a stand-in
# keeps the stream it is handed as its residual and adds to it in place.
NUM_LAYERS = 3
HIDDEN_SIZE = 4
VOCAB_SIZE = 11


class AddOneLayer(nn.Module):
    """Stands in for DeepseekV2DecoderLayer: returns (delta, residual)."""

    def forward(self, positions, hidden_states, residual, llama_4_scaling=None):
        if residual is None:
            residual = hidden_states
        else:
            residual.add_(hidden_states)
        # Attention's output joins the residual in place (post-attention norm).
        residual.add_(0.5)
        return torch.full_like(hidden_states, 0.5), residual


class AddNorm(nn.Module):
    """Stands in for the final fused add + RMSNorm, without the scaling."""

    def forward(self, hidden_states, residual):
        stream = hidden_states + residual
        return stream, stream


def stand_in_model(aux_layers: tuple[int, ...]) -> DeepseekV2Model:
    """DeepseekV2Model without its __init__ (it needs a full VllmConfig)."""
    model = object.__new__(DeepseekV2Model)
    nn.Module.__init__(model)
    model.config = SimpleNamespace()
    model.hidden_size = HIDDEN_SIZE
    model.embed_tokens = nn.Embedding(VOCAB_SIZE, HIDDEN_SIZE)
    model.layers = nn.ModuleList(AddOneLayer() for _ in range(NUM_LAYERS))
    model.start_layer, model.end_layer = 0, NUM_LAYERS
    model.norm = AddNorm()
    model.aux_hidden_state_layers = aux_layers
    return model


def test_aux_layer_zero_is_the_embedding_output(monkeypatch):
    aux_layers = tuple(range(NUM_LAYERS + 1))
    # A single pipeline rank: forward asks the PP group whether it is first/last.
    monkeypatch.setattr(
        parallel_state,
        "_PP",
        SimpleNamespace(is_first_rank=True, is_last_rank=True, world_size=1),
    )
    model = stand_in_model(aux_layers)
    input_ids = torch.tensor([1, 5, 7])

    with torch.no_grad():
        embeds = model.embed_tokens(input_ids)
        out = model.forward(input_ids, torch.arange(3), None)

    assert isinstance(out, tuple), "no aux hidden states returned"
    hidden_states, aux = out
    torch.testing.assert_close(hidden_states, embeds + NUM_LAYERS)
    assert len(aux) == len(aux_layers)
    for layer, state in zip(aux_layers, aux):
        torch.testing.assert_close(state, embeds + layer)
