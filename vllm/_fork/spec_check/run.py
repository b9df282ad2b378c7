"""Run every check for one `vllm spec-check` invocation and return (exit code, report)."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack

from vllm._fork.spec_check import checks, parallel
from vllm._fork.spec_check.findings import FAIL, INFO, Finding, as_json, as_text, exit_code
from vllm._fork.spec_check.gpus import GPUS
from vllm._fork.spec_check.inputs import config_folder, speculative_dict


def _text_architectures(model_config) -> list[str]:
    text = getattr(model_config.hf_config, "text_config", None)
    return list(getattr(text, "architectures", None) or [])


def _context_parallel(args: argparse.Namespace) -> dict[str, int]:
    """The context-parallel sizes this vLLM has flags for (older bases lack prefill context parallelism)."""
    names = ("decode_context_parallel_size", "prefill_context_parallel_size")
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def _engine_args(args: argparse.Namespace, target_dir: str, spec: dict):
    """`vllm serve`'s EngineArgs for these flags, on the config folders, with dummy weights."""
    from vllm.engine.arg_utils import EngineArgs

    engine_args = EngineArgs.from_cli_args(args)
    engine_args.model, engine_args.skip_tokenizer_init, engine_args.load_format = target_dir, True, "dummy"
    engine_args.speculative_config = dict(spec)  # the engine adds its own keys to this dict
    return engine_args


def _configs(args: argparse.Namespace, target_dir: str, spec: dict, findings: list[Finding]):
    """Build ModelConfig, ParallelConfig and SpeculativeConfig as the engine does; None after a failure."""
    from vllm.config import ParallelConfig

    engine_args = _engine_args(args, target_dir, spec)
    try:
        model_config = engine_args.create_model_config()
    except Exception as exc:
        findings.append(Finding("target config", FAIL, checks.one_line(exc), "fix the target's config.json"))
        return None
    try:
        parallel_config = ParallelConfig(
            tensor_parallel_size=args.tensor_parallel_size, pipeline_parallel_size=args.pipeline_parallel_size,
            data_parallel_size=args.data_parallel_size, enable_expert_parallel=args.enable_expert_parallel,
            **_context_parallel(args))
        model_config.verify_with_parallel_config(parallel_config)
    except Exception as exc:
        findings.append(Finding("target parallelism", FAIL, checks.one_line(exc), "change the parallel sizes"))
        return None
    try:
        spec_config = engine_args.create_speculative_config(model_config, parallel_config)
    except Exception as exc:
        findings.append(Finding("speculative config", FAIL, checks.one_line(exc),
                                "fix --speculative-config or the draft checkpoint as the reason says"))
        return None
    return model_config, parallel_config, spec_config


def run_checks(args: argparse.Namespace) -> list[Finding]:
    """All findings for one invocation; raises BadInput for questions that cannot be asked."""
    import vllm
    from vllm import platforms
    from vllm._fork.eagle3 import needs_aux_hidden_states
    from vllm._fork.spec_check.kv_plan import kv_plan_finding
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

    gpu = GPUS[args.gpu]
    spec = speculative_dict(args.speculative_config)
    registered = set(ModelRegistry.get_supported_archs())
    findings = [Finding("target GPU", INFO, f"{args.tensor_parallel_size} x {gpu.describe()}")]
    with ExitStack() as stack:
        target_dir, target = stack.enter_context(config_folder(args.model, "MODEL"))
        findings.append(checks.architecture(target, vllm.__version__, registered, "target architecture"))
        if isinstance(spec.get("model"), str):
            spec["model"], draft = stack.enter_context(config_folder(spec["model"], "speculative model"))
            findings.append(checks.architecture(draft, vllm.__version__, registered, "draft architecture"))
        if any(f.status == FAIL for f in findings):
            return findings
        requested = spec.get("method") or "(from the draft)"
        built = _configs(args, target_dir, spec, findings)
        if built is None:
            return findings
        model_config, parallel_config, spec_config = built
        findings.append(checks.speculator(spec_config, requested))
        arch = model_config.architecture
        if needs_aux_hidden_states(spec_config):
            findings.append(checks.aux_contract(arch, gpu, _text_architectures(model_config)))
            draft_text = spec_config.draft_model_config.hf_text_config
            findings += checks.aux_layers(get_eagle3_aux_layers_from_config(spec_config),
                                          model_config.hf_text_config.num_hidden_layers,
                                          model_config.get_hidden_size(),
                                          getattr(draft_text, "target_hidden_size", None)
                                          or getattr(draft_text, "hidden_size", None))
            findings.append(parallel.pipeline(arch, gpu, args.pipeline_parallel_size, spec_config.method))
        sizes = _context_parallel(args)
        findings.append(parallel.context(spec_config, sizes.get("prefill_context_parallel_size", 1),
                                         sizes.get("decode_context_parallel_size", 1)))
        if spec_config.draft_parallel_config is not None:
            findings.append(parallel.draft_placement(spec_config, bool(args.enable_expert_parallel)))
        if not any(f is not None and f.status == FAIL for f in findings):  # plan only what would start
            stand_in = getattr(platforms.current_platform, "spec_check_stand_in", False)
            findings.append(kv_plan_finding(_engine_args(args, target_dir, spec), args, stand_in))
    return [f for f in findings if f is not None]


def report(args: argparse.Namespace) -> tuple[int, str]:
    """(exit code, text or JSON report)."""
    findings = run_checks(args)
    subject = f"{args.model} with {json.dumps(args.speculative_config)}"
    return exit_code(findings), as_json(findings, subject) if args.json else as_text(findings, subject)
