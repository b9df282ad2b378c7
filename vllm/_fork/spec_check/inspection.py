"""vLLM's registry inspection of a model class, done in spec-check's own process instead of a second interpreter.

On a miss in its cache (VLLM_CACHE_ROOT/modelinfos) vLLM imports the class in a fresh Python process, so that
importing a model cannot initialise CUDA in a process that later forks workers. spec-check forks no workers and
runs no kernels, and for a multimodal target it imports the class in this process anyway (the multimodal registry
reads it), so each such process only re-imports torch and vLLM: on a first run it was most of the time to verdict.
The inspection itself, its answer and vLLM's cache (read first, written after) are unchanged.
"""

from __future__ import annotations

from contextlib import contextmanager


def _in_this_process(inspect):
    """What vLLM's subprocess does, here: load the general plugins (they may register models), then inspect."""
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    return inspect()


@contextmanager
def inspect_in_process():
    """While vLLM builds the configs, a registry cache miss inspects the class in this process."""
    from vllm.model_executor.models import registry

    in_subprocess = registry._run_in_subprocess
    registry._run_in_subprocess = _in_this_process
    try:
        yield
    finally:
        registry._run_in_subprocess = in_subprocess


def model_class(model_config):
    """The model class vLLM's registry resolves for a ModelConfig's architectures (None when it cannot)."""
    from vllm.model_executor.models.registry import ModelRegistry

    try:
        cls, _ = ModelRegistry.resolve_model_cls(model_config.architectures, model_config=model_config)
    except (ValueError, ImportError):
        return None
    return cls
