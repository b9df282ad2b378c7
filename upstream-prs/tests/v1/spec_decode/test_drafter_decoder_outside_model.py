# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""EAGLE-family drafters load over targets whose decoder is not at `.model`.

GPT-2 keeps its decoder at `transformer` and the input embedding at
`transformer.wte`; OPT at `model.decoder.embed_tokens`. Both runners' drafter
loaders must find that embedding and share it with a draft that has none.
"""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from vllm.model_executor.layers import vocab_parallel_embedding
from vllm.model_executor.layers.vocab_parallel_embedding import (
    ParallelLMHead,
    VocabParallelEmbedding,
)
from vllm.v1.spec_decode import llm_base_proposer
from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle_utils

VOCAB, HIDDEN = 32, 8
ONE_RANK = SimpleNamespace(world_size=1, rank_in_group=0)


@pytest.fixture(autouse=True)
def one_rank(monkeypatch):
    monkeypatch.setattr(
        vocab_parallel_embedding, "get_tensor_model_parallel_rank", lambda: 0
    )
    monkeypatch.setattr(
        vocab_parallel_embedding, "get_tensor_model_parallel_world_size", lambda: 1
    )
    monkeypatch.setattr(eagle_utils, "get_pp_group", lambda: ONE_RANK)
    monkeypatch.setattr(llm_base_proposer, "get_pp_group", lambda: ONE_RANK)


class GPT2Like(nn.Module):
    """A causal LM whose decoder is `transformer` and whose embedding is `wte`."""

    def __init__(self):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = VocabParallelEmbedding(VOCAB, HIDDEN)
        self.transformer.wpe = nn.Embedding(16, HIDDEN)
        self.lm_head = ParallelLMHead(VOCAB, HIDDEN)


class OPTLike(nn.Module):
    """A causal LM whose decoder sits at `model.decoder`."""

    def __init__(self):
        super().__init__()
        self.model = nn.Module()
        self.model.decoder = nn.Module()
        self.model.decoder.embed_tokens = VocabParallelEmbedding(VOCAB, HIDDEN)
        self.lm_head = ParallelLMHead(VOCAB, HIDDEN)


def _draft():
    """An EAGLE3 head without its own embedding: it must take the target's."""
    draft = nn.Module()
    draft.has_own_embed_tokens = False
    draft.model = nn.Module()
    draft.model.embed_tokens = VocabParallelEmbedding(VOCAB, HIDDEN)
    return draft


@pytest.mark.parametrize("target_class", [GPT2Like, OPTLike])
def test_v2_shares_the_embedding_of_a_decoder_outside_model(target_class):
    target, draft = target_class(), _draft()
    inner = getattr(target, "model", target)
    eagle_utils.maybe_share_target_embed(draft, draft.model, inner)
    expected = (
        target.transformer.wte
        if target_class is GPT2Like
        else target.model.decoder.embed_tokens
    )
    assert draft.model.embed_tokens is expected


def test_v2_eagle_loader_takes_the_language_model_without_model(monkeypatch):
    target, draft = GPT2Like(), _draft()
    draft.lm_head = ParallelLMHead(VOCAB, HIDDEN)
    speculative = SimpleNamespace(
        draft_model_config=None,
        draft_lm_head_quantization=None,
        apply_draft_overrides=lambda config: config,
    )
    config = SimpleNamespace(speculative_config=speculative, load_config=None)
    monkeypatch.setattr(eagle_utils, "get_draft_load_config", lambda config: None)
    monkeypatch.setattr(
        eagle_utils, "get_pp_safe_draft_load_config", lambda load_config: load_config
    )
    monkeypatch.setattr(eagle_utils, "get_model", lambda **kwargs: draft)
    loaded = eagle_utils.load_eagle_model(target, config)
    assert loaded.model.embed_tokens is target.transformer.wte
    assert loaded.lm_head is target.lm_head


@pytest.mark.parametrize("target_class", [GPT2Like, OPTLike])
def test_v1_shares_the_embedding_of_a_decoder_outside_model(target_class):
    target = target_class()
    proposer = object.__new__(SpecDecodeBaseProposer)
    proposer.model = _draft()
    proposer._maybe_share_embeddings(target)
    expected = (
        target.transformer.wte
        if target_class is GPT2Like
        else target.model.decoder.embed_tokens
    )
    assert proposer.model.model.embed_tokens is expected
    assert torch.equal(proposer.model.model.embed_tokens.weight, expected.weight)
