"""The stream entering the first layer (aux layer id 0) is recorded as it was, even when the first layer then adds
to it in place, as Llama-style layers do on CUDA (their residual is that tensor; the fused add + RMSNorm is
in place). The real LlamaModel.forward runs over stand-in layers that do the same."""

from __future__ import annotations

import torch

from fork_testing import assert_aux_states, one_pipeline_rank, skeleton

LAYERS, HIDDEN, TOKENS = 3, 4, 5


class InPlaceLayer(torch.nn.Module):
    """Adds one to the stream and hands back (delta, residual), keeping its input as the residual and adding the
    attention's share to it in place, as LlamaDecoderLayer does with the fused kernel."""

    def forward(self, positions, hidden_states, residual, **kwargs):
        if residual is None:
            residual = hidden_states
        else:
            residual.add_(hidden_states)
        residual.add_(0.5)
        return torch.full_like(hidden_states, 0.5), residual


class AddNorm(torch.nn.Module):
    def forward(self, hidden_states, residual):
        return hidden_states + residual, hidden_states + residual


def test_layer_zero_record_is_not_changed_by_the_first_layer(monkeypatch):
    from vllm.model_executor.models.llama import LlamaModel

    one_pipeline_rank(monkeypatch)
    model = skeleton(LlamaModel)
    model.do_not_compile = True
    model.layers = torch.nn.ModuleList(InPlaceLayer() for _ in range(LAYERS))
    model.start_layer, model.end_layer = 0, LAYERS
    model.norm = AddNorm()
    chosen = tuple(range(LAYERS + 1))
    model._set_aux_hidden_state_layers(chosen)
    embeds = torch.randn(TOKENS, HIDDEN)
    with torch.no_grad():
        out = model.forward(None, torch.arange(TOKENS), None, embeds.clone())
    assert_aux_states(out, chosen, LAYERS, lambda layer: embeds + layer, "LlamaModel")

