"""The fork's runner V2 EAGLE-family drafter loaders over targets whose decoder is not at `.model`.

GPT-2 keeps its decoder at `transformer` and the input embedding at
`transformer.wte`; OPT at `model.decoder.embed_tokens`. The drafter loaders
must find that embedding and share it with a draft that has none.
"""

from types import SimpleNamespace

import pytest
from torch import nn

from vllm.model_executor.layers import vocab_parallel_embedding
from vllm.model_executor.layers.vocab_parallel_embedding import (
    ParallelLMHead,
    VocabParallelEmbedding,
)
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


class GPT2Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = VocabParallelEmbedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(16, HIDDEN)


class GPT2Like(nn.Module):
    """A causal LM whose decoder is `transformer` and whose embedding is `wte`."""

    def __init__(self):
        super().__init__()
        self.transformer = GPT2Decoder()
        self.lm_head = ParallelLMHead(VOCAB, HIDDEN)

    def vocab_embedding(self) -> VocabParallelEmbedding:
        return self.transformer.wte


class OPTDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(VOCAB, HIDDEN)


class OPTModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = OPTDecoder()


class OPTLike(nn.Module):
    """A causal LM whose decoder sits at `model.decoder`."""

    def __init__(self):
        super().__init__()
        self.model = OPTModel()
        self.lm_head = ParallelLMHead(VOCAB, HIDDEN)

    def vocab_embedding(self) -> VocabParallelEmbedding:
        return self.model.decoder.embed_tokens


class DraftDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(VOCAB, HIDDEN)


class EagleHeadWithoutEmbedding(nn.Module):
    """An EAGLE3 head without its own embedding: it must take the target's."""

    has_own_embed_tokens = False

    def __init__(self):
        super().__init__()
        self.model = DraftDecoder()
        self.lm_head = ParallelLMHead(VOCAB, HIDDEN)


@pytest.mark.parametrize("target_class", [GPT2Like, OPTLike])
def test_v2_shares_the_embedding_of_a_decoder_outside_model(target_class):
    target, draft = target_class(), EagleHeadWithoutEmbedding()
    inner = getattr(target, "model", target)
    eagle_utils.maybe_share_target_embed(draft, draft.model, inner)
    assert draft.model.embed_tokens is target.vocab_embedding()


def test_v2_eagle_loader_takes_the_language_model_without_model(monkeypatch):
    target, draft = GPT2Like(), EagleHeadWithoutEmbedding()
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
    assert loaded.get_submodule("model.embed_tokens") is target.transformer.wte
    assert loaded.lm_head is target.lm_head
