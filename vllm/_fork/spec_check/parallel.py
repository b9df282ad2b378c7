"""Parallelism rules the runner enforces only after loading (PP with aux capture, PCP/DCP, draft TP/EP), and the
one-node world size a GPU-less host cannot see."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from typing import Any

from vllm._fork.spec_check import tables
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, UNKNOWN, Finding
from vllm._fork.spec_check.gpus import Gpu
from vllm._fork.vocabulary import CheckName

PIPELINE, CONTEXT, DRAFT_TP = CheckName.PIPELINE_PARALLEL, CheckName.CONTEXT_PARALLEL, CheckName.DRAFT_TENSOR_PARALLEL

PP_FLAG = "supports_aux_hidden_states_over_pp"
# Drafters that take their own TP (draft_tensor_parallel_size); every other drafter is split across the
# target's TP group, so its heads must divide the target's TP size.
OWN_TP_METHODS = ("draft_model", "dspark")
# A model class that cannot be imported on this host (kernels, optional packages) cannot be inspected.
IMPORT_ERRORS = (ImportError, OSError, RuntimeError, AttributeError)


def _import(path: str) -> type | None:
    module, _, name = path.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name)
    except IMPORT_ERRORS:
        return None
    return found if isinstance(found, type) else None


def _assigned_decoder(cls: type) -> type | None:
    """The class the outer model's __init__ assigns to `self.model` (`X(...)` or `self.model_cls(...)`)."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and any(isinstance(t, ast.Attribute) and t.attr == "model" for t in node.targets)):
                continue
            func = node.value.func
            if isinstance(func, ast.Name):
                found = inspect.getmodule(klass).__dict__.get(func.id)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                found = getattr(cls, func.attr, None)
            else:
                found = None
            if isinstance(found, type):
                return found
    return None


def decoder_classes(arch: str, gpu: Gpu) -> list[type] | None:
    """The decoder classes whose PP flag the runner reads; None when they cannot be resolved here."""
    rows = tables.rows_for(arch, gpu.vendor)
    holders = [h for row in rows for h in row.holder_classes]
    if holders:
        classes = [_import(h) for h in holders]
        return None if None in classes else classes
    outers = [_import(row.cls) for row in rows]
    if not outers or None in outers:
        return None
    decoders = [_assigned_decoder(outer) for outer in outers]
    return None if None in decoders else decoders


def pipeline(arch: str, gpu: Gpu, pp: int, method: str, alternative: str) -> Finding | None:
    """With PP > 1, aux states cross stages only if the decoder says so (eagle3_utils checks after loading)."""
    if pp <= 1:
        return None
    decoders = decoder_classes(arch, gpu)
    if decoders is None:
        return Finding(PIPELINE, UNKNOWN, f"cannot resolve {arch}'s decoder class on this host to read "
                       f"{PP_FLAG}; vLLM raises after loading when it is missing",
                       "use --pipeline-parallel-size 1 to be sure, or run spec-check where the model imports")
    names = ", ".join(d.__name__ for d in decoders)
    if all(getattr(d, PP_FLAG, False) for d in decoders):
        return Finding(PIPELINE, PASS, f"{names} relays aux states across {pp} stages")
    return Finding(PIPELINE, FAIL, f"{arch} does not support {method} with pipeline parallelism: its "
                   f"decoder {names} cannot relay aux states between stages (vLLM raises after loading)",
                   f"use --pipeline-parallel-size 1 (more tensor parallelism){alternative}")


def draft_heads(spec: Any, target_tp: int) -> Finding | None:
    """EAGLE-family drafts run on the target's TP group: their heads must divide the target's TP size."""
    draft = spec.draft_model_config
    if draft is None or spec.method in OWN_TP_METHODS or spec.method == "mtp":
        return None
    heads = draft.model_arch_config.total_num_attention_heads
    if heads % target_tp:
        return Finding(DRAFT_TP, FAIL, f"the draft's {heads} attention heads are not divisible by "
                       f"the target's tensor parallel size {target_tp} (a {spec.method} draft is split across the "
                       "target's TP group; draft_tensor_parallel_size does not change that)",
                       "use a --tensor-parallel-size that divides the draft's heads, or a draft trained for it")
    return Finding(DRAFT_TP, PASS, f"the draft's {heads} attention heads split across the target's "
                   f"TP={target_tp}")


def context(spec: Any, pcp: int, dcp: int) -> Finding | None:
    """The V2 runner's prefill-context-parallel limits for speculative decoding."""
    if pcp <= 1:
        return None
    if spec.use_dspark():
        if dcp not in (1, pcp) and spec.draft_model_config.use_mla:
            return Finding(CONTEXT, FAIL, f"PCP with DSpark needs DCP=1 or DCP=PCP; got DCP={dcp}, "
                           f"PCP={pcp}", f"set --decode-context-parallel-size 1 or {pcp}")
        return Finding(CONTEXT, PASS, f"DSpark with PCP={pcp}, DCP={dcp}")
    if spec.method != "mtp" or spec.use_multi_module_mtp():
        return Finding(CONTEXT, FAIL, f"PCP={pcp} supports only DSpark or single-module MTP, "
                       f"not {spec.method}" + (" with several MTP modules" if spec.method == "mtp" else ""),
                       "use --prefill-context-parallel-size 1")
    return Finding(CONTEXT, PASS, f"single-module MTP with PCP={pcp}")


def draft_placement(spec: Any, target_ep: bool, target_tp: int) -> Finding:
    """How the draft is sharded; a dense draft must not inherit the target's expert parallelism."""
    draft = spec.draft_parallel_config
    ep = bool(draft.enable_expert_parallel)
    tp = draft.tensor_parallel_size if spec.method in OWN_TP_METHODS else target_tp
    note = " (dense draft: target EP not inherited)" if target_ep and not ep else ""
    return Finding(CheckName.DRAFT_PARALLELISM, INFO, f"draft runs with TP={tp}, EP {'on' if ep else 'off'}{note}")


def kv_heads(model_config: Any, tp: int) -> Finding | None:
    """QKVParallelLinear (vllm/model_executor/layers/linear.py) gives each TP rank total_kv / tp KV heads when
    tp < total_kv and replicates them tp / total_kv times otherwise, asserting divisibility either way while the
    model is built on every worker; vLLM's config check looks at the attention heads only."""
    if model_config is None or model_config.use_mla or tp <= 1:
        return None
    total = model_config.get_total_num_kv_heads()
    if not total:
        return None
    splits = total % tp == 0 if tp < total else tp % total == 0
    name = CheckName.TARGET_KV_HEADS
    if splits:
        how = f"{total // tp} per rank" if tp < total else f"each replicated {tp // total}x"
        return Finding(name, PASS, f"{total} KV heads at TP={tp}: {how}")
    fits = [size for size in range(1, 2 * max(tp, total) + 1) if (total % size == 0 if size < total
                                                                  else size % total == 0)]
    near = [size for size in fits if size != tp and abs(size - tp) <= tp][:4]
    return Finding(name, FAIL, f"the target's {total} KV heads do not split across TP={tp} (QKVParallelLinear "
                   f"asserts {total} % {tp} == 0 while the model is built, on every worker)" if tp < total else
                   f"the target's {total} KV heads cannot be replicated evenly over TP={tp} (QKVParallelLinear "
                   f"asserts {tp} % {total} == 0 while the model is built, on every worker)",
                   f"use a --tensor-parallel-size such as {', '.join(map(str, near))}")


NODE_GPUS = 8  # an HGX/DGX board: a larger world is taken as several nodes unless the host shows otherwise


def node_fit(parallel_config: Any, gpu: Gpu, stand_in: bool) -> Finding | None:
    """vLLM refuses a world larger than the node's GPUs unless told it spans nodes (config/parallel.py
    ParallelConfig.__post_init__: '--nnodes' for multiprocessing, or the ray backend). On a GPU host vLLM's own
    config build decides; a GPU-less host cannot see the node, so a world beyond one board cannot be told."""
    world = parallel_config.world_size
    if not stand_in or gpu.vendor != "nvidia" or world <= NODE_GPUS or parallel_config.nnodes > 1 \
            or parallel_config.distributed_executor_backend == "ray":
        return None
    return Finding(CheckName.TARGET_PARALLELISM, UNKNOWN, f"a world of {world} GPUs on one node: vLLM refuses a "
                   "world larger than the node's GPUs ('World size ... is larger than the number of available GPUs "
                   f"... in this node'); this host cannot see the serving node's {gpu.name}s, and an HGX board holds "
                   f"{NODE_GPUS}",
                   "give the node count (--nnodes N with --node-rank, multiprocessing) or "
                   "--distributed-executor-backend ray")
