"""The dry run's checks on built (meta) models: the layers' own forward assertions, backends, the engine's KV plan."""

from __future__ import annotations

import ast
import copy
import inspect
import os
import textwrap
from collections import Counter
from functools import cache

from vllm._fork.kv_pages import DISABLE_ENV

# A planning budget as one H100 (TP1) gives: 0.85 x 80 GiB less a few GiB of weights and activations. An engine
# with kv_cache_memory_bytes (every gpu-check engine) plans with that instead, as its worker reports it.
AVAILABLE_KV_BYTES = 60 << 30


# Node types of a condition on construction-time attributes only (no calls, no indexing into runtime buffers).
_STATIC = (ast.Expression, ast.BoolOp, ast.Compare, ast.UnaryOp, ast.Attribute, ast.Name, ast.Constant, ast.Tuple,
           ast.List, ast.Set, ast.Load, ast.boolop, ast.cmpop, ast.unaryop)


@cache
def _self_assertions(cls) -> tuple:
    """(source, code) of each unconditional `assert` in cls.forward on attributes of `self` alone."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
    except (OSError, TypeError):  # forward defined in C or generated: no source to read
        return ()
    found = []
    for node in tree.body[0].body:  # top level only: a branch's assert holds only on that branch
        if not isinstance(node, ast.Assert):
            continue
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        if names == {"self"} and all(isinstance(n, _STATIC) for n in ast.walk(node.test)):
            found.append((ast.unparse(node.test), compile(ast.Expression(node.test), "<assert>", "eval")))
    return tuple(found)


def forward_assertions(*models) -> tuple[int, list[str]]:
    """Evaluate the layers' own forward-time shape assertions on the built modules: (how many, failures)."""
    checked, failures = 0, []
    for model in models:
        for prefix, module in model.named_modules():
            for source, code in _self_assertions(type(module)):
                checked += 1
                if not eval(code, {}, {"self": module}):  # noqa: S307 - the layer's own assert, compiled above
                    failures.append(f"{type(module).__name__}.forward asserts `{source}` ({prefix})")
    return checked, failures


def attention_backends(vc) -> dict[str, Counter]:
    """The backend every attention layer picked, split into target and draft layers."""
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    picked = {"target": Counter(), "draft": Counter()}
    for layer in get_layers_from_vllm_config(vc, AttentionLayerBase).values():
        side = "draft" if getattr(layer, "is_draft_layer", False) else "target"
        picked[side][layer.get_attn_backend().get_name()] += 1
    return picked


class _StandInExecutor:
    """Answers EngineCore._initialize_kv_caches as one TP1 worker would, from the specs its layers gave."""

    def __init__(self, vc, specs: dict, available: int):
        self.vllm_config, self.specs, self.available, self.kv_cache_configs = vc, specs, available, None

    def get_kv_cache_specs(self):
        return [self.specs]

    def get_supported_kv_cache_layouts(self):
        from vllm.v1.worker.worker_base import WorkerBase

        return [WorkerBase.get_supported_kv_cache_layouts(self)]

    def set_kv_cache_layout(self, name: str, interleave: int) -> None:
        from vllm.v1.worker.worker_base import WorkerBase

        WorkerBase.set_kv_cache_layout(self, name, interleave)

    def determine_available_memory(self):
        return [self.available]

    def initialize_from_config(self, configs) -> None:
        self.kv_cache_configs = configs

    def compile_or_warm_up_model(self) -> None:
        """Compilation, CUDA graph capture and warm-up: the first kernels, where the dry run ends."""

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None, **more):
        """As one worker without a device: the KV pools' backend question from the meta-built layers, nothing else."""
        from vllm._fork.kv_pools_auto import answer_without_device

        return [answer_without_device(method, self, args)]


class _StandInCore:
    def __init__(self, executor):
        self.model_executor, self.available_gpu_memory_for_kv_cache = executor, 0

    def collective_rpc(self, *args, **kwargs):
        return self.model_executor.collective_rpc(*args, **kwargs)


def collect_specs(platform, vc) -> dict:
    """The executor's block-size update, then the V2 runner's per-layer spec collection (draft flags included)."""
    from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

    platform.update_block_size_for_backend(vc)
    return get_kv_cache_spec(vc)


def plan(vc, specs: dict, packing: bool = True, available: int | None = None, max_len: int | None = None,
         keep: dict | None = None) -> dict:
    """EngineCore._initialize_kv_caches on a copy of the config's mutable parts; the groups it planned.

    keep: receives the planned copy of the config and the KVCacheConfig (for the Scheduler and the views)."""
    from vllm.v1.engine.core import EngineCore

    if available is None:
        available = vc.cache_config.kv_cache_memory_bytes or AVAILABLE_KV_BYTES
    planned = copy.copy(vc)
    for part in ("cache_config", "scheduler_config", "parallel_config", "model_config"):
        object.__setattr__(planned, part, copy.deepcopy(getattr(vc, part)))
    if max_len:
        planned.model_config.max_model_len = max_len
    before = os.environ.get(DISABLE_ENV)
    os.environ[DISABLE_ENV] = "0" if packing else "1"
    try:
        config = EngineCore._initialize_kv_caches(_StandInCore(_StandInExecutor(planned, specs, available)), planned)
    finally:
        os.environ.pop(DISABLE_ENV) if before is None else os.environ.__setitem__(DISABLE_ENV, before)
    if keep is not None:
        keep.update(vc=planned, config=config)
    from gpu_engine import kv_config  # what the GPU engine reports of its scheduler's config, from the same code

    groups = []
    for group in config.kv_cache_groups:
        members = getattr(group.kv_cache_spec, "kv_cache_specs", None) or {n: group.kv_cache_spec
                                                                         for n in group.layer_names}
        draft = all(getattr(spec, "is_draft", False) for spec in members.values())
        groups.append({"kind": type(next(iter(members.values()))).__name__, "draft": draft,
                       "layers": len(group.layer_names), "block_size": group.kv_cache_spec.block_size})
    return {"num_blocks": config.num_blocks, "block_size": planned.cache_config.block_size, "groups": groups,
            "layout": str(planned.cache_config.kv_cache_layout), "kv_config": kv_config(config, planned.cache_config)}


def draft_blocks(planned: dict) -> list[int]:
    return [g["block_size"] for g in planned["groups"] if g["draft"]]


# The views are allocated for real on the CPU: a small pool of the same plan (a short max_model_len fits it).
VIEW_KV_BYTES, VIEW_MAX_LEN = 96 << 20, 2048


def scheduler(planned_vc, config) -> dict:
    """The Scheduler EngineCore builds for this KV config: its block sizes, KV cache manager and per-group pools."""
    from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.structured_output import StructuredOutputManager

    block_size, hash_block_size = resolve_kv_cache_block_sizes(config, planned_vc)
    built = Scheduler(vllm_config=planned_vc, kv_cache_config=config,
                      structured_output_manager=StructuredOutputManager(planned_vc), block_size=block_size,
                      hash_block_size=hash_block_size, log_stats=False)
    from gpu_engine import kv_config

    manager = built.kv_cache_manager
    return {"block_size": block_size, "hash_block_size": hash_block_size,
            "free_blocks": manager.block_pool.get_num_free_blocks(),
            "coordinator": type(manager.coordinator).__name__,
            "pools": [type(m.block_pool).__name__ for m in manager.coordinator.single_type_managers],
            "kv_config": kv_config(built.kv_cache_config, planned_vc.cache_config)}


def kv_views(planned_vc, config, specs: dict) -> dict:
    """The per-layer KV tensors the runner binds, allocated on the CPU from the plan: shape per layer."""
    import torch
    from vllm.v1.worker.utils import allocate_kv_cache

    views = allocate_kv_cache(config, torch.device("cpu"), planned_vc.cache_config.get_resolved_kv_cache_layout())
    missing = sorted(set(specs) - set(views))
    if missing:
        raise RuntimeError(f"no KV view for {len(missing)} layers, e.g. {missing[0]}")
    for name, view in views.items():  # every view must lie inside its backing allocation
        storage = view.untyped_storage().nbytes()
        last = view.storage_offset() + sum((n - 1) * s for n, s in zip(view.shape, view.stride())) + 1
        if last * view.element_size() > storage:
            raise RuntimeError(f"KV view of {name} reaches past its allocation")
    return {name: list(view.shape) for name, view in views.items()}


def prefix_hits(planned_vc, config, batches: list[list[list[int]]], max_tokens: int = 8) -> list[int]:
    """Prefix-hit tokens per prompt when the batches go one after another through vLLM's KVCacheManager on this
    plan, called as the scheduler calls it (tests/kv_pools_sim.py): do gpu-check's prompts exercise the cache?"""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kv_pools_sim import Engine
    from planner import manager_args  # benchmarks/glm5_kv: what the Scheduler hands its KVCacheManager

    engine = Engine(config, manager_args(planned_vc, config))
    chunk = max(1, planned_vc.scheduler_config.max_num_batched_tokens // engine.block)
    for number, batch in enumerate(batches):
        for index, prompt in enumerate(batch):
            engine.add(f"{number}-{index}", prompt, chunk_blocks=chunk)
        while engine.waiting or engine.running:
            engine.step(accepted=1)
            for request in [r for r in engine.running if r.num_output_tokens >= max_tokens]:
                engine.finish(request)
    return [hit for _, hit in engine.hits]
