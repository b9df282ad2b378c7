"""The fork's KV offloading with `block_size` when an EAGLE/MTP draft's KV group has another block size."""

import json

import pytest
import torch

from vllm.config import (
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import (
    build_offloading_config,
)
from vllm.platforms import current_platform
from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
from vllm.v1.core.kv_cache_planning import (
    get_global_kv_cache_groups,
    get_kv_cache_configs,
)
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheSpec,
    SlidingWindowSpec,
)

from fork_testing import TINY_DECODER

# A small Llama target; the KV specs planned below alternate sliding-window and full attention, 2 KV heads.
TARGET = TINY_DECODER | {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}
# Its EAGLE3 head has twice the KV heads, so twice the page size per token.
DRAFT = TARGET | {
    "architectures": ["Eagle3LlamaForCausalLM"],
    "num_hidden_layers": 1,
    "num_key_value_heads": 4,
}


def _checkpoint(path, config: dict) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def _planned(tmp_path, monkeypatch, **speculative):
    """A speculative config with an offloading connector, and the planned KV groups."""
    # The planner groups layers by attention type (each group keeping its own
    # block size) only with the hybrid KV cache manager, as on GPU platforms.
    monkeypatch.setattr(current_platform, "support_hybrid_kv_cache", lambda: True)
    target = ModelConfig(
        model=_checkpoint(tmp_path / "target", TARGET),
        skip_tokenizer_init=True,
        max_model_len=1024,
    )
    vllm_config = VllmConfig(
        model_config=target,
        device_config=DeviceConfig(device="cpu"),
        cache_config=CacheConfig(block_size=16),
        speculative_config=SpeculativeConfig(
            method="eagle3",
            model=_checkpoint(tmp_path / "eagle3", DRAFT),
            num_speculative_tokens=3,
            target_model_config=target,
            **speculative,
            target_parallel_config=ParallelConfig(),
        ),
        kv_transfer_config=KVTransferConfig(
            kv_connector="OffloadingConnector",
            kv_role="kv_both",
            kv_connector_extra_config={"block_size": 64},
        ),
    )
    common = dict(block_size=16, head_size=32, dtype=torch.bfloat16)
    specs: dict[str, KVCacheSpec] = {
        f"model.layers.{i}.self_attn.attn": (
            FullAttentionSpec(num_kv_heads=2, **common)
            if i % 2
            else SlidingWindowSpec(num_kv_heads=2, sliding_window=128, **common)
        )
        for i in range(4)
    }
    specs["draft.layers.0.self_attn.attn"] = FullAttentionSpec(
        num_kv_heads=4, is_draft=True, **common
    )
    resolve_kv_cache_layout(vllm_config, [["LBNHC"]], specs.values())
    groups = get_global_kv_cache_groups(vllm_config, [specs])
    [kv_cache_config] = get_kv_cache_configs(vllm_config, [specs], [64 << 20], groups)
    return vllm_config, kv_cache_config


@pytest.fixture
def planned(tmp_path, monkeypatch):
    return _planned(tmp_path, monkeypatch)


def _with_extra_config(planned, extra_config: dict):
    vllm_config, kv_cache_config = planned
    vllm_config.kv_transfer_config.kv_connector_extra_config = extra_config
    return vllm_config, kv_cache_config


def test_chunk_in_tokens_is_sized_from_the_target_groups(planned):
    vllm_config, kv_cache_config = _with_extra_config(planned, {"block_size": 64})
    # The planner doubled the target's block size to match the draft's page.
    block_sizes = [g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups]
    assert sorted(set(block_sizes)) == [16, 32]
    config = build_offloading_config(vllm_config, kv_cache_config)
    assert (
        config.cache.blocks_per_chunk == 2
    )  # 64 tokens of the target's 32-token blocks
    assert sorted({g.tokens_per_block for g in config.groups}) == [16, 32]


def test_the_same_as_blocks_per_chunk(planned):
    vllm_config, kv_cache_config = _with_extra_config(planned, {"blocks_per_chunk": 2})
    by_blocks = build_offloading_config(vllm_config, kv_cache_config)
    vllm_config.kv_transfer_config.kv_connector_extra_config = {"block_size": 64}
    by_tokens = build_offloading_config(vllm_config, kv_cache_config)
    assert by_tokens.cache == by_blocks.cache
    assert by_tokens.groups == by_blocks.groups


def test_a_chunk_that_is_no_multiple_of_the_target_block_is_refused(planned):
    vllm_config, kv_cache_config = _with_extra_config(planned, {"block_size": 48})
    with pytest.raises(ValueError, match="multiple of the GPU KV cache block size"):
        build_offloading_config(vllm_config, kv_cache_config)
