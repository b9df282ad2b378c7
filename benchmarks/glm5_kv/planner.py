"""Drive vLLM's own engine-side KV-cache planning for GLM-5.3-Flash (+DFlash2) at TP8 rank 0."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import torch

TP = 8


def make_vllm_config(target_dir: str, draft_dir: str | None, kv_dtype: str, prefix_caching: bool = True):
    """Build the VllmConfig `vllm serve` would, with TP8 and (optionally) the DFlash2 drafter."""
    from vllm.engine.arg_utils import EngineArgs

    spec = None
    if draft_dir:
        spec = {"method": "dflash", "model": draft_dir, "num_speculative_tokens": 7}
    return EngineArgs(
        model=target_dir, skip_tokenizer_init=True, tensor_parallel_size=TP,
        speculative_config=spec, gpu_memory_utilization=0.9,
        kv_cache_dtype=kv_dtype, load_format="dummy", enable_prefix_caching=prefix_caching,
    ).create_engine_config()


def init_fake_tp(vc) -> None:
    """Rank 0 of TP8 in one process: spec-check's own fake TP group (vllm/_fork/spec_check/kv_plan.py)."""
    from vllm._fork.spec_check.kv_plan import init_one_rank

    init_one_rank(vc, TP)


def build_target_attention(vc) -> dict:
    """Construct only the target's attention modules (the MoE would not fit in host RAM)."""
    from vllm.config import set_current_vllm_config
    from vllm.models.glm5next.common.attention import Glm5NextMLAAttention
    from vllm.models.glm5next.common.kda import Glm5NextLinearAttention
    from vllm.models.glm5next.common.model import _is_kda_layer, get_sparse_topk_buffer_width
    from vllm.utils.torch_utils import set_default_torch_dtype

    # Same view of the config the ConditionalGeneration wrapper hands its text model.
    tvc = vc.with_hf_config(vc.model_config.hf_config.text_config,
                            architectures=["Glm5NextForCausalLM"])
    cfg = tvc.model_config.hf_text_config
    mods = {}
    # The loader constructs under the model dtype; layer specs read dtypes from it.
    with set_current_vllm_config(tvc), torch.device("cpu"), \
            set_default_torch_dtype(tvc.model_config.dtype):
        topk = torch.empty(tvc.scheduler_config.max_num_batched_tokens,
                           get_sparse_topk_buffer_width(cfg), dtype=torch.int32)
        for i in range(cfg.num_hidden_layers):
            # Layer names must match the real model's, the planner groups by them.
            prefix = f"language_model.model.layers.{i}.self_attn"
            if _is_kda_layer(cfg, i):
                mods[prefix] = Glm5NextLinearAttention(config=cfg, vllm_config=tvc, prefix=prefix)
                continue
            mods[prefix] = Glm5NextMLAAttention(
                vllm_config=tvc, config=cfg, hidden_size=cfg.hidden_size,
                num_heads=cfg.num_attention_heads, qk_nope_head_dim=cfg.qk_nope_head_dim,
                qk_rope_head_dim=cfg.qk_rope_head_dim, v_head_dim=cfg.v_head_dim,
                q_lora_rank=cfg.q_lora_rank, kv_lora_rank=cfg.kv_lora_rank,
                max_position_embeddings=cfg.max_position_embeddings,
                cache_config=tvc.cache_config, quant_config=None, prefix=prefix,
                topk_indices_buffer=topk, skip_rope=cfg.mla_use_nope)
    return mods


def build_drafter(vc):
    """Construct the real DFlash2 drafter as the V2 runner's DFlash loader does; return it."""
    from vllm.compilation.backends import set_model_tag
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.model_executor.models.qwen3_dflash import dflash_has_any_non_causal
    from vllm.utils.torch_utils import set_default_torch_dtype

    sc = vc.speculative_config
    dmc = sc.draft_model_config
    before = set(get_layers_from_vllm_config(vc, AttentionLayerBase))
    # The loader gives the drafter its own attention/cache config (non-causal, spec KV dtype).
    draft_vc = replace(
        vc,
        attention_config=replace(vc.attention_config,
                                 use_non_causal=dflash_has_any_non_causal(dmc.hf_config),
                                 backend=sc.attention_backend),
        cache_config=(replace(vc.cache_config, cache_dtype=sc.kv_cache_dtype)
                      if sc.kv_cache_dtype is not None else vc.cache_config),
    )
    with set_model_tag("dflash_head"), torch.device("cpu"), \
            set_default_torch_dtype(dmc.dtype):
        model = initialize_model(vllm_config=draft_vc, model_config=dmc)
    # The speculator flags its layers so their specs come out with is_draft=True.
    layers = get_layers_from_vllm_config(vc, AttentionLayerBase)
    for name in set(layers) - before:
        layers[name].is_draft_layer = True
    return model


def collect_specs(platform, vc) -> dict:
    """Executor block-size update, then the V2 runner's per-layer spec collection."""
    from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

    platform.update_block_size_for_backend(vc)
    return get_kv_cache_spec(vc)


def plan(vc, specs: dict, available_bytes: int, save: Path | None = None) -> dict:
    """EngineCore's own KV-cache initialisation (through spec-check's planner), then the capacity numbers; `save`
    gets the scheduler's KV config, a worker config of 8 blocks and the KV manager's arguments (a pickle)."""
    from vllm._fork.spec_check.kv_plan import plan_kv_caches
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    sched, worker = plan_kv_caches(vc, specs, available_bytes)
    layout = vc.cache_config.get_resolved_kv_cache_layout()
    pool_bytes = max(t.size for t in worker.kv_cache_tensors)  # groups alias one pool
    out = {"layout": layout.name, "num_blocks": sched.num_blocks,
           "hit_alignment": sched.cache_hit_alignment_tokens, "slots_per_block": getattr(worker, "slots_per_block", None),
           "block_size": vc.cache_config.block_size, "pool_bytes": pool_bytes,
           "block_stride": pool_bytes // sched.num_blocks,
           "n_groups": len(worker.kv_cache_groups),
           "kv_cache_size_tokens": vc.cache_config.kv_cache_size_tokens,
           "max_model_len": vc.model_config.max_model_len, "concurrency": {}}
    # vLLM's own per-request formula, evaluated at shorter request lengths.
    full_len = vc.model_config.max_model_len
    for length in (8192, 131072, full_len):
        vc.model_config.max_model_len = length
        out["concurrency"][length] = get_max_concurrency_for_kv_cache_config(vc, sched)
    vc.model_config.max_model_len = 8192
    out["groups_8k"] = group_breakdown(vc, worker)
    vc.model_config.max_model_len = full_len
    if save is not None:
        save.write_bytes(pickle.dumps({"scheduler": sched, "worker_8_blocks": small_worker(vc, worker),
                                       "manager_args": manager_args(vc, sched), "layout": layout.name}))
    return out


def small_worker(vc, worker):
    """The worker's KV config re-planned for 8 shared blocks, as the engine plans it (views fit in host RAM)."""
    from vllm._fork.kv_pools_plan import carve_kv_cache_configs
    from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder

    config = get_kv_cache_config_builder(vc).get_kv_cache_config_from_groups(vc, worker.kv_cache_groups, 8)
    return carve_kv_cache_configs(vc, [config])[0]


def manager_args(vc, sched) -> dict:
    """What the scheduler hands its KVCacheManager for this config (vllm/v1/core/sched/scheduler.py)."""
    from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes

    scheduler_block_size, hash_block_size = resolve_kv_cache_block_sizes(sched, vc)
    spec = vc.speculative_config
    return {"max_model_len": vc.model_config.max_model_len, "max_in_flight_tokens": vc.max_in_flight_tokens,
            "enable_caching": vc.cache_config.enable_prefix_caching,
            "use_eagle": bool(spec and spec.use_eagle_block_drop()) and not vc.num_hash_lookahead_tokens,
            "num_hash_lookahead_tokens": vc.num_hash_lookahead_tokens,
            "num_prefill_lookahead": vc.num_prefill_lookahead_tokens,
            "scheduler_block_size": scheduler_block_size, "hash_block_size": hash_block_size,
            "num_lookahead_tokens": vc.num_lookahead_tokens, "num_speculative_tokens": vc.num_speculative_tokens}


def group_breakdown(vc, worker) -> list[dict]:
    """Per KV group at the current max_model_len: its kind, layers, whole blocks per request, the block stride its
    views use (the shared stride, or a slot of it in a carved pool) and the bytes those blocks hold vs the bytes
    its layers need (the terms get_max_concurrency_for_kv_cache_config sums)."""
    from vllm.utils.math_utils import cdiv

    rows = []
    for group in worker.kv_cache_groups:
        stride = max(t.block_stride for t in worker.kv_cache_tensors if set(t.layers) & set(group.layer_names))
        spec = group.kv_cache_spec
        need = spec.max_memory_usage_bytes(vc)
        members = getattr(spec, "kv_cache_specs", None)  # the worker groups aggregate per-layer specs
        first = next(iter(members.values())) if members else spec
        kind = type(first).__name__ + (" (draft)" if getattr(first, "is_draft", False) else "")
        rows.append({"kind": kind, "layers": len(group.layer_names), "blocks": cdiv(need, spec.page_size_bytes),
                     "block_size": spec.block_size, "stride": stride,
                     "needed_bytes": need, "page_bytes": spec.page_size_bytes})
    return rows
