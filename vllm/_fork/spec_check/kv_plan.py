"""The KV-cache plan of target + draft by the engine's own planning, without weights, where the host has a platform.

The models are built on the meta device (shapes, no memory), their layers give their KV specs as a worker's
runner reads them, and EngineCore's own `_initialize_kv_caches` plans with an executor that answers from
them. Only the available memory is not profiled: it is --kv-cache-memory-bytes, or --gpu-memory-utilization
of the device minus the weights (activation peak and CUDA graphs are not subtracted).
"""

from __future__ import annotations

import socket
import types

from vllm._fork.kv_pools_plan import pools_pending
from vllm._fork.spec_check.checks import one_line
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, Finding, Refused
from vllm._fork.spec_check.kv_groups import breakdowns
from vllm._fork.spec_check.kv_report import capacity_findings, group_table
from vllm._fork.spec_check.weights import memory_utilization
from vllm._fork.vocabulary import CheckName

GIB = 1 << 30
NAME = CheckName.KV_CACHE_PLAN


class _PlannedExecutor:
    """What EngineCore asks its executor while planning, answered from one rank's specs and memory."""

    def __init__(self, vllm_config, specs: dict, available: int):
        self.specs, self.available = specs, available
        self.worker = types.SimpleNamespace(vllm_config=vllm_config, cache_config=vllm_config.cache_config)

    def get_kv_cache_specs(self):
        return [self.specs]

    def get_supported_kv_cache_layouts(self):
        from vllm.v1.worker.worker_base import WorkerBase

        return [WorkerBase.get_supported_kv_cache_layouts(self.worker)]

    def set_kv_cache_layout(self, *layout):
        from vllm.v1.worker.worker_base import WorkerBase

        WorkerBase.set_kv_cache_layout(self.worker, *layout)

    def extensible_kv_cache_unsupported_reason(self, specs):
        return "spec-check plans one stated KV budget instead of measuring memory after warm-up"

    def disable_extensible_kv_cache(self, reason: str):
        self.worker.cache_config.enable_extensible_kv_cache = False

    def determine_available_memory(self):
        return [self.available]

    def initialize_from_config(self, configs):
        self.configs = configs

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None, **more):
        """The KV pools' questions as a worker without a device answers them: its meta-built layers' backends, and no
        self-test result (so auto plans stock's)."""
        from vllm._fork.kv_pools_auto import answer_without_device

        return [answer_without_device(method, self.worker, args)]

    def compile_or_warm_up_model(self):
        return 0.0


class FakeTPGroup:
    """A real one-process group that reports the deployment's TP size, so layers shard as on rank 0 of it."""

    def __init__(self, real, size: int):
        self._real, self.world_size, self.rank_in_group, self.ranks = real, size, 0, list(range(size))
        self.is_first_rank, self.is_last_rank = True, size == 1

    def __getattr__(self, name):
        return getattr(self._real, name)


def init_one_rank(vllm_config, tp: int) -> None:
    """A one-process gloo world whose TP group claims size `tp` (also used by benchmarks/glm5_kv)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with set_current_vllm_config(vllm_config):
        parallel_state.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                                    distributed_init_method=f"tcp://127.0.0.1:{port}")
        parallel_state.initialize_model_parallel(1, 1)
    if tp > 1:
        parallel_state._TP = FakeTPGroup(parallel_state._TP, tp)


def release_one_rank() -> None:
    """Tear the one-rank world down, so that the next plan in this process starts its own."""
    from vllm.distributed import parallel_state

    parallel_state.destroy_model_parallel()
    parallel_state.destroy_distributed_environment()


def _attention_layers(vllm_config) -> dict:
    from vllm.config import get_layers_from_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    return get_layers_from_vllm_config(vllm_config, AttentionLayerBase)


def _build_on_meta(vllm_config) -> tuple[int, int]:
    """Target and draft on the meta device; returns their weight bytes and their verify records' bytes on this rank."""
    from vllm._fork.spec_check.draft_build import layers_forgotten

    try:  # the layers built before a failure are forgotten, or the retry would register them twice
        with layers_forgotten(vllm_config.compilation_config, on_success=False):
            return _build(vllm_config, data_on_cpu=False)
    except NotImplementedError as exc:  # a constructor read numbers back from a tensor it made
        if "meta tensor" not in str(exc):
            raise
        return _build(vllm_config, data_on_cpu=True)


def verify_record_bytes(models) -> int:
    """Bytes of the RecoverSSM verify records the models' KDA layers allocate when they are built: memory outside
    the KV cache that a worker holds from model loading on, so it comes out of the KV budget."""
    import torch

    records = [getattr(module, "recoverssm_records", None) for model in models for module in model.modules()]
    return sum(t.numel() * t.element_size() for r in records if r is not None for t in vars(r).values()
               if isinstance(t, torch.Tensor))


def _build(vllm_config, data_on_cpu: bool) -> tuple[int, int]:
    """The draft's attention layers are flagged `is_draft_layer`, as the speculator's load_model does, so their
    KV specs come out as the engine plans them (a packed draft group shows its own block size)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    from vllm._fork.spec_check.draft_build import on_meta

    models = []
    # Buffers a model makes on the platform's device by name go to meta too: nothing is allocated on a GPU host.
    with set_current_vllm_config(vllm_config), torch.device("meta"), on_meta(data_on_cpu):
        with set_default_torch_dtype(vllm_config.model_config.dtype):
            models.append(initialize_model(vllm_config=vllm_config))
        spec = vllm_config.speculative_config
        # n-gram and suffix decoding name the target itself as their draft model, and have no KV cache of their own.
        draft = spec.draft_model_config if spec is not None and spec.uses_draft_kv_cache() else None
        if draft is not None:
            target_layers = set(_attention_layers(vllm_config))
            with set_default_torch_dtype(draft.dtype):
                models.append(initialize_model(vllm_config=vllm_config, model_config=draft))
            for name, layer in _attention_layers(vllm_config).items():
                if name not in target_layers:
                    layer.is_draft_layer = True
    return (sum(p.numel() * p.element_size() for model in models for p in model.parameters()),
            verify_record_bytes(models))


def plan_kv_caches(vllm_config, specs: dict, kv_memory: int):
    """EngineCore's own _initialize_kv_caches on one rank's specs: (scheduler KV config, that rank's KV config).

    Also used by benchmarks/glm5_kv, which builds the specs on a stand-in SM90 platform."""
    from vllm.v1.engine.core import EngineCore

    executor = _PlannedExecutor(vllm_config, specs, kv_memory)
    core = types.SimpleNamespace(model_executor=executor, collective_rpc=lambda *a, **k: None,
                                 available_gpu_memory_for_kv_cache=kv_memory)
    return EngineCore._initialize_kv_caches(core, vllm_config), executor.configs[0]


class PlannerRefused(Exception):
    """vLLM's KV planner refused the config (not enough KV memory for one request at max_model_len)."""


def plan(vllm_config, kv_memory: int | None, records_from_budget: bool = False) -> dict:
    """Meta-built layers of the engine config spec-check built once (configs.build), their specs, then
    EngineCore's own planning steps. `records_from_budget`: `kv_memory` is what the weights leave (a benchmark's
    stated budget), so RecoverSSM's verify records come out of it too, as they do of a computed budget."""
    from vllm.platforms import current_platform
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config
    from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

    init_one_rank(vllm_config, vllm_config.parallel_config.tensor_parallel_size)
    try:
        weights, records = _build_on_meta(vllm_config)
        # The executors set the block size from the built layers' backends (and align it with the Mamba page on a
        # hybrid target) after loading the model, before the runner collects the specs.
        current_platform.update_block_size_for_backend(vllm_config)
        specs = get_kv_cache_spec(vllm_config)  # the collection runner V2 makes of its layers
        if kv_memory is None:
            fraction = memory_utilization(vllm_config.cache_config)
            kv_memory = int(fraction * current_platform.get_device_total_memory()) - weights - records
        elif records_from_budget:
            kv_memory -= records
        try:
            scheduler_config, worker_config = plan_kv_caches(vllm_config, specs, kv_memory)
        except ValueError as exc:  # check_enough_kv_cache_memory: one request at max_model_len does not fit
            raise PlannerRefused(one_line(exc)) from exc
        planned = breakdowns(vllm_config, worker_config, specs)  # the worker's groups hold every layer's own spec
        pending = pools_pending(vllm_config, worker_config)
    finally:  # a batch of checks (tests/scripts/spec_check_batch.py) plans again in this process
        release_one_rank()
    return {"tokens": vllm_config.cache_config.kv_cache_size_tokens, "blocks": scheduler_config.num_blocks,
            "breakdowns": planned,
            "draft_block_sizes": sorted({row.block_size for row in planned[0].groups if row.draft}),
            "groups": len(scheduler_config.kv_cache_groups), "block_size": vllm_config.cache_config.block_size,
            "max_model_len": vllm_config.model_config.max_model_len, "available": kv_memory, "weights": weights,
            "verify_records": records,
            "pools_pending": pending,
            "concurrency": get_max_concurrency_for_kv_cache_config(vllm_config, scheduler_config)}


def _replayssm_finding(vllm_config, args, rebuild, planned) -> Finding | None:
    """Where the target keeps recurrent states per draft position and vLLM lets it take --use-replayssm: vLLM's own
    plan with the flag, and the first --mamba-backend its validation accepts (it names the one each model needs)."""
    first = planned[0]
    if (rebuild is None or not first.speculative_state_bytes or vllm_config.cache_config.use_replayssm
            or not vllm_config.model_config.supports_replayssm):
        return None
    chosen = str(getattr(args, "mamba_backend", None) or "triton").lower()
    for backend in dict.fromkeys((chosen, "triton", "flashinfer")):
        try:
            config = rebuild({"use_replayssm": True, "mamba_backend": backend})
        except Refused:  # vLLM's validation: this backend cannot serve it
            continue
        result = plan(config, args.kv_cache_memory_bytes)
        replanned, records = result["breakdowns"][0], result["verify_records"]
        flags = f"--use-replayssm --mamba-backend {backend}"
        held = f"; its verify records hold {records / GIB:.2f} GiB per rank outside the KV cache" if records else ""
        return Finding(NAME, INFO, f"{flags} keeps no recurrent state per draft position: max concurrency "
                       f"{first.concurrency:.2f} -> {replanned.concurrency:.2f} at {first.length:,} tokens "
                       f"(vLLM's plan with those flags{held})",
                       data={"flags": flags, "concurrency": replanned.concurrency, "verify_records": records})
    return None


def kv_plan_findings(vllm_config, args, stand_in: bool, rebuild=None) -> list[Finding]:
    """The plan's line with its group table and capacity warnings, or why it was not computed on this host;
    `rebuild(overrides)` builds the engine config again with some flags changed (for the --use-replayssm line)."""
    if stand_in:
        return [Finding(NAME, INFO, "not computed on a host without the GPU: the KV specs come from the attention "
                       "backends vLLM picks there; run spec-check on a node with one such GPU (no weights needed)")]
    if args.pipeline_parallel_size > 1:
        return [Finding(NAME, INFO, "not computed with pipeline parallelism (each stage plans its own layers)")]
    from vllm.platforms import current_platform

    if current_platform.is_cpu() and args.kv_cache_memory_bytes is None:
        return [Finding(NAME, INFO, "not computed: on the CPU platform pass --kv-cache-memory-bytes")]
    try:
        result = plan(vllm_config, args.kv_cache_memory_bytes)
    except PlannerRefused as refused:  # only the planner's own refusal; a layer that fails to build is not one
        return [Finding(NAME, FAIL, str(refused), "lower --max-model-len, or give the KV cache more memory")]
    unprofiled = "" if args.kv_cache_memory_bytes else ", activation peak not subtracted"
    # Draft groups whose pages the fork packed (vllm/_fork/kv_pages.py) have blocks of their own size.
    packed = [size for size in result["draft_block_sizes"] if size != result["block_size"]]
    draft = f", draft {'/'.join(map(str, packed))}" if packed else ""
    others = "".join(f", {b.concurrency:.2f} at {b.length:,}" for b in result["breakdowns"][1:])
    line = Finding(NAME, PASS, f"{result['tokens']:,} KV tokens in {result['groups']} group(s) of "
                   f"{result['blocks']:,} blocks (block {result['block_size']}{draft}); max concurrency "
                   f"{result['concurrency']:.2f} at {result['max_model_len']:,} tokens{others}; "
                   f"{result['available'] / GIB:.2f} GiB for KV per rank{unprofiled}",
                   detail=group_table(result["breakdowns"][0]),
                   data={"available_bytes": result["available"],
                         "requests": [b.as_dict() for b in result["breakdowns"]]})
    replayssm = _replayssm_finding(vllm_config, args, rebuild, result["breakdowns"])
    pools = Finding(NAME, INFO, "this is the stock plan: by default (VLLM_FORK_KV_POOLS=auto) the engine carves KV "
                    "pools per page size for the attention groups whose kernels pass its start-up self-test on the "
                    "GPU (its log says which); VLLM_FORK_KV_POOLS=on shows the carved plan here")
    return ([line] + capacity_findings(result["breakdowns"], replayssm is not None) + [replayssm] * bool(replayssm)
            + [pools] * result["pools_pending"])
