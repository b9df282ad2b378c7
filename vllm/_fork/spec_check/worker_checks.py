"""What the workers build and load, checked without a GPU or weights: KV-head sharding, attention backends on
`--gpu`, kernel limits, the draft class against its config and checkpoint, the MTP layers' tensors."""

from __future__ import annotations

import builtins
import traceback
from pathlib import Path

from vllm._fork.spec_check import attention, configs, contents, draft_build, parallel
from vllm._fork.spec_check.backends import NoBackend
from vllm._fork.spec_check.checkpoint import tensors
from vllm._fork.spec_check.checks import one_line, speculator_name
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, UNKNOWN, Finding
from vllm._fork.spec_check.gpus import Gpu
from vllm._fork.vocabulary import CheckName

DRAFT_CLASS = CheckName.DRAFT_CLASS


def _nested(config: dict, field: str, where: str = "") -> str | None:
    """Where in the raw config.json `field` sits below the top level (e.g. 'dflash_config'), if anywhere."""
    for key, value in config.items():
        if isinstance(value, dict):
            if field in value:
                return f"{where}{key}"
            found = _nested(value, field, f"{where}{key}.")
            if found:
                return found
    return None


def _raised_in(exc: BaseException) -> str:
    """file:line where `exc` was raised (an assert without a message names nothing else)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"


def _in_model_code(exc: BaseException) -> bool:
    """Raised by a model class's own code (vllm/model_executor/models, vllm/models), not by this host."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and any(part in frames[-1].filename for part in ("/model_executor/models/", "/vllm/models/"))


def _build_failure(exc: BaseException, arch: str, draft: dict, gpu: Gpu, tp: int) -> Finding:
    """A draft that cannot be built: a field its class reads, a TP split it asserts, no backend, or this host."""
    from transformers import PretrainedConfig

    if isinstance(exc, NoBackend):
        return attention.no_backend_finding(exc, gpu)
    if isinstance(exc, builtins.AttributeError) and isinstance(getattr(exc, "obj", None), PretrainedConfig):
        nested = _nested(draft, exc.name)
        return Finding(DRAFT_CLASS, FAIL, f"{arch} reads config.{exc.name}, which the draft's config.json does not "
                       "set at the top level" + (f" (it is under {nested})" if nested else "") + ": the class "
                       "fails while the draft loads, after the target's weights",
                       f"set {exc.name} at the top level of the draft's config.json" if nested else
                       "use the draft's published config.json")
    if isinstance(exc, KeyError) and _in_model_code(exc) and isinstance(exc.args[0] if exc.args else None, str):
        key = exc.args[0]
        nested = _nested(draft, key)
        return Finding(DRAFT_CLASS, FAIL, f"{arch} looks up '{key}' in its config ({_raised_in(exc)}), which the "
                       "draft's config.json does not give" + (f" where the class reads it (it is under {nested})"
                                                              if nested else "") + ": the class fails while the "
                       "draft loads, after the target's weights", "use the draft's published config.json")
    if isinstance(exc, AssertionError) and ("is not divisible by" in str(exc) or _in_model_code(exc)):
        return Finding(DRAFT_CLASS, FAIL, f"{arch} does not build at the draft's TP={tp}: "
                       f"{one_line(exc)} at {_raised_in(exc)}", "use a tensor parallel size that divides the "
                       "draft's heads (and KV heads), or the draft's published config")
    where = f" at {_raised_in(exc)}" if not str(exc) else ""
    return Finding(DRAFT_CLASS, UNKNOWN, f"could not build {arch} here to read what it needs "
                   f"({one_line(exc)}{where})", "check the draft on a GPU host before a long deployment")


def draft_findings(vllm_config, draft: dict, gpu: Gpu) -> list[Finding]:
    spec = vllm_config.speculative_config
    draft_config = spec.draft_model_config
    name = speculator_name(spec)
    folder = draft_config.model
    arch = ", ".join(draft_config.architectures or []) or "the draft"
    if gpu.vendor != "nvidia" and name in draft_build.LOADERS:
        # The draft's attention layers need a backend to be built; ROCm's choice depends on the host's AITER.
        listing = tensors(folder)
        return [Finding(DRAFT_CLASS, INFO, f"not built for {gpu.name}: ROCm's attention backend choice depends on "
                        "AITER being installed on the serving host"),
                contents.no_listing(folder, arch) if listing is None else
                Finding(contents.DRAFT, INFO, f"{len(listing.names):,} tensors in {listing.source}; not compared "
                        "with the class (it was not built)")]
    built = draft_build.build(vllm_config, name, tensors(folder))
    if built is None:
        return []
    tp = built.tp
    if built.error is not None:
        if built.loading and (isinstance(built.error, (KeyError, ValueError)) or _in_model_code(built.error)):
            return [Finding(contents.DRAFT, FAIL, f"{arch} cannot load the draft checkpoint: {one_line(built.error)}"
                            " (vLLM's loader stops the same way)", "use the draft checkpoint its model card names")]
        return [_build_failure(built.error, arch, draft, gpu, tp)]
    params = sum(p.numel() for p in built.model.parameters())
    found = [Finding(DRAFT_CLASS, PASS, f"{type(built.model).__name__} builds from the draft's config "
                     f"({params / 1e9:.2f}B parameters on rank 0 of TP={tp}, meta device)"),
             attention.draft_finding(built.selections, gpu)]
    return found + contents.draft_findings(built, folder, arch)
