# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""RecoverSSM on GLM-5.3-Flash's KDA layers gives what its stored states give.

The layer runs twice on the same weights and inputs: once as without
--use-replayssm (GDN metadata, one state slot per draft position) and once with
it (Kimi-K3's KDA metadata, one slot per request, the commit after sampling).
The kernel tests run on CUDA, or on the CPU under TRITON_INTERPRET=1.
"""

import json
import os

import pytest
import torch
from transformers import Glm5NextTextConfig

from vllm.config import (
    CacheConfig,
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    VllmConfig,
    set_current_vllm_config,
)
from vllm.distributed import (
    cleanup_dist_env_and_memory,
    init_distributed_environment,
    initialize_model_parallel,
)
from vllm.forward_context import set_forward_context
from vllm.v1.attention.backend import CommonAttentionMetadata
from vllm.v1.worker.gpu.model_states.recoverssm import RecoverSSMState
from vllm.v1.worker.utils import AttentionGroup

NUM_SPEC = 7
WINDOW = NUM_SPEC + 1
HEADS, HEAD_DIM = 2, 128
# Request b accepts b % WINDOW + 1 tokens of its first window: every count.
REQUESTS = WINDOW
PREFIX = "model.layers.0.linear_attn"

if torch.cuda.is_available():
    DEVICE = torch.device("cuda")
elif os.environ.get("TRITON_INTERPRET") == "1":
    DEVICE = torch.device("cpu")
else:
    DEVICE = None
needs_kernels = pytest.mark.skipif(
    DEVICE is None, reason="needs CUDA, or TRITON_INTERPRET=1 on the CPU"
)


@pytest.fixture(scope="module")
def glm_dir(tmp_path_factory) -> str:
    text = Glm5NextTextConfig(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        n_routed_experts=4,
        num_experts_per_tok=2,
        linear_head_dim=HEAD_DIM,
        linear_num_heads=HEADS,
        max_position_embeddings=4096,
        layer_types=["linear_attention", "indexed_attention"],
        pad_token_id=0,
    ).to_dict()
    text.update(architectures=["Glm5NextForCausalLM"], dtype="bfloat16")
    path = tmp_path_factory.mktemp("glm5next")
    (path / "config.json").write_text(json.dumps(text))
    return str(path)


def _target(glm_dir: str) -> ModelConfig:
    return ModelConfig(model=glm_dir, skip_tokenizer_init=True, max_model_len=1024)


def _vllm_config(
    glm_dir: str, use_replayssm: bool, state_dtype: str = "float32"
) -> VllmConfig:
    target = _target(glm_dir)
    speculative = SpeculativeConfig(
        method="ngram",
        num_speculative_tokens=NUM_SPEC,
        prompt_lookup_max=3,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )
    config = VllmConfig(
        model_config=target,
        cache_config=CacheConfig(
            use_replayssm=use_replayssm,
            enable_prefix_caching=False,
            mamba_ssm_cache_dtype=state_dtype,
        ),
        speculative_config=speculative,
        device_config=DeviceConfig(DEVICE.type if DEVICE else "cpu"),
    )
    # What the platform sets for a hybrid model without prefix caching.
    config.cache_config.mamba_block_size = target.max_model_len
    return config


def test_glm5next_takes_recoverssm_with_speculative_decoding(glm_dir):
    assert _target(glm_dir).supports_replayssm, (
        "Glm5NextForCausalLM does not declare SupportsReplaySSM"
    )
    config = _vllm_config(glm_dir, use_replayssm=True)
    assert config.cache_config.use_kda_recoverssm


@pytest.fixture(scope="module")
def single_rank(glm_dir):
    if DEVICE is None:
        pytest.skip("needs CUDA, or TRITON_INTERPRET=1 on the CPU")
    with pytest.MonkeyPatch.context() as patch:
        if DEVICE.type == "cpu":
            import vllm.models.glm5next.nvidia.ops.third_party.kda.fused_recurrent as fr
            from vllm.triton_utils import tl
            from vllm.utils import torch_utils

            # The interpreter patches tl when a kernel launches; the module's
            # alias of tl.exp was bound before that. No pinned memory without
            # CUDA.
            patch.setattr(fr, "exp", lambda x: tl.exp(x))
            patch.setattr(torch_utils, "PIN_MEMORY", False)
        with set_current_vllm_config(_vllm_config(glm_dir, use_replayssm=False)):
            init_distributed_environment(
                world_size=1,
                rank=0,
                local_rank=0,
                distributed_init_method=f"file://{glm_dir}/dist_init",
                backend="gloo" if DEVICE.type == "cpu" else "nccl",
            )
            initialize_model_parallel(1)
        yield
        cleanup_dist_env_and_memory()


def _layer(glm_dir: str, use_replayssm: bool, state_dtype: str):
    from vllm.models.glm5next.common.kda import Glm5NextLinearAttention

    config = _vllm_config(glm_dir, use_replayssm, state_dtype)
    with set_current_vllm_config(config), torch.device(DEVICE):
        layer = Glm5NextLinearAttention(
            config.model_config.hf_text_config, config, prefix=PREFIX
        )
    generator = torch.Generator(device="cpu").manual_seed(0)
    with torch.no_grad():
        for param in (layer.conv1d.weight, layer.A_log, layer.dt_bias):
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    spec = layer.get_kv_cache_spec(config)
    builder = layer.get_attn_backend().get_builder_cls()(spec, [PREFIX], config, DEVICE)
    # One row of state blocks per request: 1 + num_speculative_blocks of them.
    width = 1 + spec.num_speculative_blocks
    layer.kv_cache = tuple(
        torch.zeros(1 + REQUESTS * width, *shape, dtype=dtype, device=DEVICE)
        for shape, dtype in zip(spec.shapes, spec.dtypes)
    )
    table = 1 + torch.arange(REQUESTS * width, dtype=torch.int32, device=DEVICE)
    return config, layer, builder, table.view(REQUESTS, width)


def _batch(
    seq_lens: list[int], table: torch.Tensor, num_tokens: int
) -> CommonAttentionMetadata:
    """Every request verifies one window; `num_tokens` may pad the batch's
    tokens past them, as a piecewise CUDA graph does."""
    query_start_cpu = torch.arange(0, REQUESTS * WINDOW + 1, WINDOW, dtype=torch.int32)
    seq_lens_cpu = torch.tensor(seq_lens, dtype=torch.int32)
    return CommonAttentionMetadata(
        query_start_loc=query_start_cpu.to(DEVICE),
        query_start_loc_cpu=query_start_cpu,
        seq_lens=seq_lens_cpu.to(DEVICE),
        num_reqs=REQUESTS,
        num_actual_tokens=num_tokens,
        max_query_len=WINDOW,
        max_seq_len=max(seq_lens),
        block_table_tensor=table,
        slot_mapping=torch.zeros(num_tokens, dtype=torch.int64, device=DEVICE),
        is_prefilling=torch.zeros(REQUESTS, dtype=torch.bool),
        seq_lens_cpu_upper_bound=seq_lens_cpu,
    )


def _speculate(glm_dir: str, use_replayssm: bool, state_dtype: str, short: int = 0):
    """Two verify windows of every request: the outputs of each, and each
    request's state after the second. The second batch's tokens are padded.
    `short`: the commit folds in that many tokens fewer than were accepted."""
    config, layer, builder, table = _layer(glm_dir, use_replayssm, state_dtype)
    conv_state, state = layer.kv_cache
    generator = torch.Generator(device="cpu").manual_seed(1)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=generator) * scale).to(DEVICE)

    # The state and short-convolution history the windows start from.
    first = table[:, 0].long()
    state[first] = randn(REQUESTS, *state.shape[1:], scale=0.3).to(state.dtype)
    conv_state[first] = randn(REQUESTS, *conv_state.shape[1:]).to(conv_state.dtype)

    tokens = REQUESTS * WINDOW
    num_accepted = torch.ones(REQUESTS, dtype=torch.int32, device=DEVICE)
    seq_lens = [100] * REQUESTS
    outputs = []
    for accepted, padded in (
        ([b % WINDOW + 1 for b in range(REQUESTS)], tokens),
        ([3 * b % WINDOW + 1 for b in range(REQUESTS)], tokens + 5),
    ):
        qkv = randn(padded, 3 * HEADS * HEAD_DIM).bfloat16()
        gate = randn(1, padded, HEADS, HEAD_DIM).bfloat16()
        beta = randn(1, padded, HEADS).bfloat16()
        seq_lens = [n + WINDOW for n in seq_lens]
        metadata = builder.build(
            0,
            _batch(seq_lens, table, padded),
            num_accepted_tokens=num_accepted,
            num_decode_draft_tokens_cpu=torch.full(
                (REQUESTS,), NUM_SPEC, dtype=torch.int32
            ),
        )
        out = torch.zeros(
            1, padded, HEADS, HEAD_DIM, dtype=torch.bfloat16, device=DEVICE
        )
        with set_forward_context({PREFIX: metadata}, config):
            layer._forward(qkv_proj_states=qkv, g1=gate, beta=beta, core_attn_out=out)
        outputs.append(out[:, :tokens].float())
        num_accepted = torch.tensor(accepted, dtype=torch.int32, device=DEVICE)
        # What the runner's Mamba model state does after sampling.
        recoverssm = RecoverSSMState()
        group = AttentionGroup(
            backend=layer.get_attn_backend(),
            layer_names=[PREFIX],
            kv_cache_spec=builder.kv_cache_spec,
            kv_cache_group_id=0,
        )
        recoverssm.record_step({PREFIX: metadata}, [[group]], for_capture=False)
        recoverssm.commit_step(
            num_accepted - short,
            torch.arange(REQUESTS, dtype=torch.int32, device=DEVICE),
            state_indices=None,
            num_accepted_tokens=torch.ones_like(num_accepted),
        )
    # RecoverSSM commits into the request's one slot; without it the state
    # after token j of the window is in slot j.
    slots = table[:, 0]
    if not use_replayssm:
        slots = table[torch.arange(REQUESTS), (num_accepted - 1).long()]
    return outputs, state[slots.long()].float()


@pytest.fixture(scope="module")
def stored(glm_dir, single_rank):
    return {
        dtype: _speculate(glm_dir, False, dtype) for dtype in ("float32", "bfloat16")
    }


def _state_tolerance(dtype: str, scale: torch.Tensor) -> torch.Tensor:
    # fp32: the commit adds the accepted tokens' terms in another order than the
    # step-by-step kernel, at most WINDOW of them. bf16: both keep the state in
    # fp32 inside the window and round it once when storing.
    if dtype == "float32":
        return 1e-5 * scale.clamp(min=1.0)
    return scale * 2**-8


@needs_kernels
def test_recoverssm_keeps_one_state_slot_per_request(glm_dir, single_rank):
    _, stock, stock_builder, _ = _layer(glm_dir, False, "float32")
    _, layer, builder, _ = _layer(glm_dir, True, "float32")
    assert stock_builder.kv_cache_spec.num_speculative_blocks == NUM_SPEC
    assert builder.kv_cache_spec.num_speculative_blocks == 0
    assert layer.get_attn_backend() is not stock.get_attn_backend()
    assert builder.kv_cache_spec.shapes == stock_builder.kv_cache_spec.shapes


@needs_kernels
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_recoverssm_gives_the_stored_states_outputs_and_state(glm_dir, stored, dtype):
    outputs, states = _speculate(glm_dir, True, dtype)
    stored_outputs, stored_states = stored[dtype]
    # The second window starts from the committed state and the compacted
    # convolution history, so its outputs check the commit too.
    for out, want in zip(outputs, stored_outputs):
        assert (out - want).abs().max() <= want.abs().max() * 2**-7
    scale = stored_states.abs().amax(dim=(1, 2, 3))
    error = (states - stored_states).abs().amax(dim=(1, 2, 3))
    assert (scale > 0.1).all()
    assert (error <= _state_tolerance(dtype, scale)).all(), (error, scale)


@needs_kernels
def test_committing_one_token_too_few_is_caught(glm_dir, stored):
    outputs, states = _speculate(glm_dir, True, "float32", short=1)
    stored_outputs, stored_states = stored["float32"]
    assert (outputs[0] - stored_outputs[0]).abs().max() <= 1e-5
    assert (outputs[1] - stored_outputs[1]).abs().max() > 0.1 * stored_outputs[
        1
    ].abs().max()
    scale = stored_states.abs().amax(dim=(1, 2, 3))
    error = (states - stored_states).abs().amax(dim=(1, 2, 3))
    assert (error > 100 * _state_tolerance("float32", scale)).all()
