# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""KV offloading with `block_size` over KV groups of several block sizes: an error that names them."""

import json

import pytest
import torch

from vllm.config import DeviceConfig, KVTransferConfig, ModelConfig, VllmConfig
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import (
    build_offloading_config,
)
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)

TARGET = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}


def test_groups_of_two_block_sizes_get_a_message_with_the_way_out(tmp_path):
    path = tmp_path / "target"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(TARGET))
    vllm_config = VllmConfig(
        model_config=ModelConfig(
            model=str(path), skip_tokenizer_init=True, max_model_len=1024
        ),
        device_config=DeviceConfig(device="cpu"),
        kv_transfer_config=KVTransferConfig(
            kv_connector="OffloadingConnector",
            kv_role="kv_both",
            kv_connector_extra_config={"block_size": 64},
        ),
    )
    # Two groups whose pages the planner gave different block sizes.
    groups = [
        KVCacheGroupSpec(
            [f"model.layers.{i}.self_attn.attn"],
            FullAttentionSpec(
                block_size=block_size,
                num_kv_heads=2,
                head_size=32,
                dtype=torch.bfloat16,
            ),
        )
        for i, block_size in enumerate((16, 32))
    ]
    kv_cache_config = KVCacheConfig(
        num_blocks=0, kv_cache_tensors=[], kv_cache_groups=groups
    )
    with pytest.raises(
        ValueError, match=r"\[16, 32\] tokens per block.*blocks_per_chunk"
    ):
        build_offloading_config(vllm_config, kv_cache_config)
