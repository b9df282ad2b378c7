"""The stream entering the first layer (aux layer id 0) is recorded as it was, even when the first layer then adds
to it in place, as Llama-style layers do on CUDA (their residual is that tensor; the fused add + RMSNorm is
in place). The real LlamaModel.forward and DeepseekV2Model.forward run over stand-in layers that do the same.

DeepseekV2Model has its own record (the fork-only edit in edits/vllm/model_executor/models/deepseek_v2.py.fork.toml):
on stock vLLM it adds a residual that is still None there, and aux layer 0 fails with a TypeError. A real DeepSeek-V2
layer is not run here: the CPU engine's MLA backend packs 16-bit weights only (docs/supported.md), and no GPU has run it."""

from __future__ import annotations

import torch

from fork_testing import assert_aux_states, one_pipeline_rank, skeleton

LAYERS, HIDDEN, TOKENS = 3, 4, 5


class InPlaceLayer(torch.nn.Module):
    """Adds one to the stream and hands back (delta, residual), keeping its input as the residual and adding the
    attention's share to it in place, as LlamaDecoderLayer does with the fused kernel."""

    def forward(self, positions, hidden_states, residual, *args, **kwargs):
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



def test_deepseek_v2_layer_zero_record_is_a_copy_of_the_embedding_output(monkeypatch):
    from types import SimpleNamespace

    from vllm.model_executor.models.deepseek_v2 import DeepseekV2Model

    one_pipeline_rank(monkeypatch)
    model = skeleton(DeepseekV2Model)
    model.config = SimpleNamespace()  # no llama_4_scaling
    model.hidden_size = HIDDEN
    model.layers = torch.nn.ModuleList(InPlaceLayer() for _ in range(LAYERS))
    model.start_layer, model.end_layer = 0, LAYERS
    model.norm = AddNorm()
    chosen = tuple(range(LAYERS + 1))
    model.aux_hidden_state_layers = chosen
    embeds = torch.randn(TOKENS, HIDDEN)
    with torch.no_grad():
        out = model.forward(None, torch.arange(TOKENS), None, embeds.clone())
    assert_aux_states(out, chosen, LAYERS, lambda layer: embeds + layer, "DeepseekV2Model")
