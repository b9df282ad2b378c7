"""The engine's configs, built once the way `vllm serve` builds them, with the step that failed named.

`EngineArgs.create_engine_config` runs exactly once; its own sub-steps are wrapped on the instance so an error
says which step raised it. Every check and the KV plan read the one `VllmConfig` this returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm._fork.spec_check.findings import Refused
from vllm._fork.spec_check.inspection import inspect_in_process
from vllm._fork.vocabulary import CheckName

# The step names double as the check names of the report.
TARGET, PARALLELISM, SPECULATIVE, ENGINE = (CheckName.TARGET_CONFIG, CheckName.TARGET_PARALLELISM,
                                           CheckName.SPECULATIVE_CONFIG, CheckName.ENGINE_CONFIG)
FIXES = {
    TARGET: "fix the target's config.json, or the serve flags the reason names",
    PARALLELISM: "change the parallel sizes (--tensor-parallel-size, --pipeline-parallel-size, …)",
    SPECULATIVE: "fix --speculative-config or the draft checkpoint as the reason says",
    ENGINE: "change the serve flag the reason names",
}


def _config_errors() -> tuple[type[BaseException], ...]:
    """What vLLM and transformers raise for a configuration they refuse: pydantic's ValidationError is a
    ValueError, transformers raises OSError for a config it cannot read and huggingface_hub's strict-dataclass
    error for fields that contradict each other. Anything else is spec-check's own fault, not a verdict."""
    errors: tuple[type[BaseException], ...] = (ValueError, NotImplementedError, OSError)
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # an older hub library without strict dataclasses
        return errors
    return (*errors, StrictDataclassError)


@dataclass
class _Progress:
    step: str = TARGET


def _wrap(engine_args, progress: _Progress) -> None:
    """Shadow the two factory methods on this instance so the current step is always known."""
    make_model, make_spec = engine_args.create_model_config, engine_args.create_speculative_config

    def create_model_config(*args, **kwargs):
        progress.step = TARGET
        model_config = make_model(*args, **kwargs)
        progress.step = ENGINE
        return model_config

    def create_speculative_config(target_model_config, target_parallel_config, *args, **kwargs):
        # VllmConfig verifies the target against the parallel config again later; asking first names the step.
        progress.step = PARALLELISM
        target_model_config.verify_with_parallel_config(target_parallel_config)
        progress.step = SPECULATIVE
        spec = make_spec(target_model_config, target_parallel_config, *args, **kwargs)
        progress.step = ENGINE
        return spec

    engine_args.create_model_config = create_model_config
    engine_args.create_speculative_config = create_speculative_config


def engine_args_for(args, target_dir: str, spec: dict):
    """`vllm serve`'s EngineArgs for these flags, on the config folders, with dummy weights and no tokenizer."""
    from vllm.engine.arg_utils import EngineArgs

    engine_args = EngineArgs.from_cli_args(args)
    engine_args.model, engine_args.skip_tokenizer_init, engine_args.load_format = target_dir, True, "dummy"
    engine_args.speculative_config = dict(spec)  # the engine adds its own keys to this dict
    # --spec-method/--spec-model/--spec-tokens are already merged into `spec` (inputs.speculative_dict).
    engine_args.spec_method = engine_args.spec_model = engine_args.spec_tokens = None
    return engine_args


def build(engine_args):
    """The VllmConfig of one `vllm serve`; raises Refused naming the step vLLM refused."""
    progress = _Progress()
    _wrap(engine_args, progress)
    try:
        with inspect_in_process():
            return engine_args.create_engine_config()
    except _config_errors() as exc:
        raise Refused(progress.step, exc) from exc
