# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""TurboQuant KV: speculative verify batches are never FULL-captured."""

import json

import pytest
import torch

from vllm.config import (
    CacheConfig,
    CompilationConfig,
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.config.compilation import CompilationMode, CUDAGraphMode
from vllm.v1.attention.backend import AttentionCGSupport
from vllm.v1.attention.backends.turboquant_attn import (
    TurboQuantAttentionBackend,
    TurboQuantMetadataBuilder,
)
from vllm.v1.kv_cache_interface import FullAttentionSpec

TARGET = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}
KV_SPEC = FullAttentionSpec(
    block_size=16, num_kv_heads=2, head_size=32, dtype=torch.bfloat16
)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> ModelConfig:
    path = tmp_path_factory.mktemp("target") / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(TARGET))
    return ModelConfig(model=str(path), skip_tokenizer_init=True, max_model_len=1024)


def _config(target: ModelConfig, speculative: bool) -> VllmConfig:
    spec = SpeculativeConfig(
        method="ngram",
        num_speculative_tokens=3,
        prompt_lookup_max=3,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )
    return VllmConfig(
        model_config=target,
        device_config=DeviceConfig(device="cpu"),
        cache_config=CacheConfig(cache_dtype="turboquant_k8v4"),
        speculative_config=spec if speculative else None,
    )


def _resolved(vllm_config: VllmConfig) -> CUDAGraphMode:
    support = TurboQuantMetadataBuilder.get_cudagraph_support(vllm_config, KV_SPEC)
    # The default mode on GPUs, resolved as both model runners resolve it.
    compilation = CompilationConfig(
        mode=CompilationMode.VLLM_COMPILE,
        cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE,
    )
    return compilation.resolve_cudagraph_mode_and_sizes(
        support,
        TurboQuantAttentionBackend.get_name(),
        uniform_decode_query_len=vllm_config.uniform_decode_query_len,
    )


def test_verify_batches_are_not_fully_captured(target):
    vllm_config = _config(target, speculative=True)
    assert vllm_config.uniform_decode_query_len == 4
    assert _resolved(vllm_config).decode_mode() != CUDAGraphMode.FULL


def test_single_token_decodes_keep_full_graphs(target):
    vllm_config = _config(target, speculative=False)
    support = TurboQuantMetadataBuilder.get_cudagraph_support(vllm_config, KV_SPEC)
    assert support == AttentionCGSupport.UNIFORM_BATCH
    assert _resolved(vllm_config).decode_mode() == CUDAGraphMode.FULL
