"""Parallelism rules the runner enforces only after loading: PP with aux capture, PCP/DCP, draft TP/EP."""

from __future__ import annotations

import importlib
from typing import Any

from vllm._fork.spec_check import tables
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, WARN, Finding
from vllm._fork.spec_check.gpus import Gpu


def _class_flag(path: str, flag: str) -> bool | None:
    """A class attribute of module.Class, or None when the class cannot be imported here."""
    module, _, name = path.rpartition(".")
    try:
        return bool(getattr(getattr(importlib.import_module(module), name), flag, False))
    except Exception:  # e.g. a platform class whose kernels need the GPU to import
        return None


def pipeline(arch: str, gpu: Gpu, pp: int, method: str) -> Finding | None:
    """With PP > 1, aux states cross stages only if the decoder says so (eagle3_utils checks at load)."""
    if pp <= 1:
        return None
    holders = [h for row in tables.rows_for(arch, gpu.vendor) for h in row["holder_classes"]]
    flags = {h: _class_flag(h, "supports_aux_hidden_states_over_pp") for h in holders}
    if holders and all(flags.values()):
        return Finding("pipeline parallel", PASS, f"{', '.join(holders)} relays aux states across {pp} stages")
    if any(value is False for value in flags.values()):
        return Finding("pipeline parallel", FAIL, f"{arch} does not support {method} with pipeline parallelism "
                       "(its decoder cannot relay aux states between stages)",
                       "use --pipeline-parallel-size 1 (more tensor parallelism), or method mtp")
    return Finding("pipeline parallel", WARN, f"cannot import {arch}'s decoder here to check PP support",
                   "the runner checks at load time")


def context(spec: Any, pcp: int, dcp: int) -> Finding | None:
    """The V2 runner's prefill-context-parallel limits for speculative decoding."""
    if pcp <= 1:
        return None
    if spec.use_dspark():
        if dcp not in (1, pcp) and spec.draft_model_config.use_mla:
            return Finding("context parallel", FAIL, f"PCP with DSpark needs DCP=1 or DCP=PCP; got DCP={dcp}, "
                           f"PCP={pcp}", f"set --decode-context-parallel-size 1 or {pcp}")
        return Finding("context parallel", PASS, f"DSpark with PCP={pcp}, DCP={dcp}")
    if spec.method != "mtp" or spec.use_multi_module_mtp():
        return Finding("context parallel", FAIL, f"PCP={pcp} supports only DSpark or single-module MTP, "
                       f"not {spec.method}" + (" with several MTP modules" if spec.method == "mtp" else ""),
                       "use --prefill-context-parallel-size 1")
    return Finding("context parallel", PASS, f"single-module MTP with PCP={pcp}")


def draft_placement(spec: Any, target_ep: bool) -> Finding:
    """How the draft is sharded; a dense draft must not inherit the target's expert parallelism."""
    draft = spec.draft_parallel_config
    ep = bool(draft.enable_expert_parallel)
    note = " (dense draft: target EP not inherited)" if target_ep and not ep else ""
    return Finding("draft parallelism", INFO, f"draft runs with TP={draft.tensor_parallel_size}, "
                   f"EP {'on' if ep else 'off'}{note}")
