"""Run every check for one `vllm spec-check` invocation and return (exit code, report)."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack

from vllm._fork.spec_check import checks, configs, registry, weights
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, Finding, Refused, as_json, as_text, exit_code, own_faults
from vllm._fork.spec_check.gpus import GPUS
from vllm._fork.spec_check.inputs import ALIASES, config_folder, speculative_dict
from vllm._fork.vocabulary import CheckName


def _stand_in() -> bool:
    """This host answers for the GPU through spec-check's config-only platform."""
    from vllm import platforms

    return getattr(platforms.current_platform, "spec_check_stand_in", False)


def _speculators_model(args, target: dict, stack: ExitStack) -> tuple[str, dict, dict]:
    """MODEL is a speculators checkpoint: serve runs its verifier with it as the draft (maybe_override_with_speculators)."""
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    try:
        spec = SpeculatorsConfig.extract_vllm_speculative_config(config_dict=target)
    except ValueError as exc:  # vLLM's own validation of the checkpoint's config: serve stops the same way
        raise Refused(configs.SPECULATIVE, exc) from None
    method = spec["method"]
    spec.update(speculative_dict(args.speculative_config, args, required=False))
    spec["method"], spec["model"] = method, args.model  # the format fixes both, as in serve
    verifier = ((target.get("speculators_config") or {}).get("verifier") or {}).get("name_or_path")
    if not verifier:
        raise Refused(configs.SPECULATIVE, ValueError("the speculators checkpoint names no verifier"))
    target_dir, verifier_config = stack.enter_context(
        config_folder(verifier, "MODEL's verifier (speculators_config.verifier.name_or_path)"))
    return target_dir, verifier_config, spec


def _registered() -> set[str]:
    from vllm.model_executor.models.registry import ModelRegistry

    return set(ModelRegistry.get_supported_archs())


def _before_configs(args, stack: ExitStack, findings: list[Finding]):
    """Inputs read and checked before vLLM builds anything: (target dir, target, draft, spec) or None on a failure."""
    import vllm

    target_dir, target = stack.enter_context(config_folder(args.model, "MODEL"))
    with own_faults(CheckName.SPECULATORS_CHECKPOINT):
        if "speculators_config" in target:
            target_dir, target, spec = _speculators_model(args, target, stack)
            findings.append(Finding(CheckName.SPECULATORS_CHECKPOINT, INFO, f"MODEL is a {spec['method']} speculators "
                                    f"checkpoint: its verifier {target_dir} is the target, as in `vllm serve`"))
        else:
            spec = speculative_dict(args.speculative_config, args)
    with own_faults("architecture"):
        registered = _registered()
        findings.append(checks.architecture(target, vllm.__version__, registered, CheckName.TARGET_ARCHITECTURE))
        draft = None
        if isinstance(spec.get("model"), str):
            spec["model"], draft = stack.enter_context(config_folder(spec["model"], "speculative model"))
            findings.append(checks.architecture(draft, vllm.__version__, registered, CheckName.DRAFT_ARCHITECTURE))
    with own_faults(CheckName.SPECULATIVE_CONFIG):
        findings.append(checks.requested_method(spec, target, draft))
    if any(f is not None and f.status == FAIL for f in findings):
        return None
    return target_dir, target, draft, spec


def _kv_plan(args, vllm_config, findings: list[Finding], rebuild) -> None:
    """The engine's own KV plan where the host has the platform; when it decides, it outranks the estimate."""
    from vllm._fork.spec_check.kv_plan import kv_plan_findings

    with own_faults(CheckName.KV_CACHE_PLAN):
        plan = kv_plan_findings(vllm_config, args, _stand_in(), rebuild)
    findings += plan
    if plan[0].status in (PASS, FAIL):
        for index, f in enumerate(findings):
            if f is not None and f.check == weights.NAME:
                findings[index] = Finding(f.check, INFO, f"{f.reason} (estimate; the KV plan above decides)")


def run_checks(args: argparse.Namespace) -> list[Finding]:
    """All findings for one invocation; raises BadInput for questions that cannot be asked, OwnFault for ours."""
    return [f for f in _findings(args) if f is not None]


def _findings(args: argparse.Namespace) -> list[Finding | None]:
    gpu = GPUS[args.gpu]
    findings = [Finding(CheckName.TARGET_GPU, INFO, f"{args.tensor_parallel_size} x {gpu.describe()}")]
    with ExitStack() as stack:
        try:
            before = _before_configs(args, stack, findings)
        except Refused as refused:
            findings.append(Finding(refused.step, FAIL, checks.one_line(refused.cause), configs.FIXES[refused.step]))
            return findings
        if before is None:
            return findings
        target_dir, target, draft, spec = before
        requested = spec.get("method") or checks.DETECTED
        try:
            with own_faults(configs.ENGINE):
                vllm_config = configs.build(configs.engine_args_for(args, target_dir, spec))
        except Refused as refused:
            findings.append(Finding(refused.step, FAIL, checks.one_line(refused.cause), configs.FIXES[refused.step]))
            return findings
        findings += registry.run_all(registry.Deployment(args, vllm_config, target, draft, requested, _stand_in()))
        if not any(f is not None and f.status == FAIL for f in findings):  # plan only what would start
            def rebuild(overrides: dict):  # the same invocation with some flags changed
                changed = argparse.Namespace(**{**vars(args), **overrides})
                return configs.build(configs.engine_args_for(changed, target_dir, spec))

            _kv_plan(args, vllm_config, findings, rebuild)
    return findings


def report(args: argparse.Namespace) -> tuple[int, str]:
    """(exit code, text or JSON report)."""
    with own_faults("spec-check"):
        findings = run_checks(args)
        given = {**(args.speculative_config or {}), **{key: getattr(args, attribute) for _, attribute, key in ALIASES
                                                       if getattr(args, attribute, None) is not None}}
        subject = f"{args.model} with {json.dumps(given)}"
        return exit_code(findings), as_json(findings, subject) if args.json else as_text(findings, subject)
