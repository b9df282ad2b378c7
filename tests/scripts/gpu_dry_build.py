"""The dry run's engine stand-ins: SM90 platform, one TP1 rank, target and drafter built on the meta device."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks" / "glm5_kv"))

import sm90_stub  # noqa: E402  (no vllm import may precede sm90_stub.install)


def install_platform(work: Path):
    """The stand-in SM90 (H100) platform; call before anything imports vllm."""
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "1")
    platform = sm90_stub.install("H100", sm90_stub.build_libcuda_stub(work))
    _no_device_objects()
    # One more device query some attention impls ask at construction: H100 SXM has 132 SMs.
    type(platform).num_compute_units = classmethod(lambda cls, device_id=0: 132)
    return platform


def init_world() -> None:
    """One rank (gloo on loopback) for the whole process; the model-parallel groups are each scenario's own."""
    from vllm.distributed import init_distributed_environment

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                 distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo")


def model_parallel(vc) -> dict:
    """The TP1 groups this scenario's engine would build, after tearing down the previous scenario's.

    initialize_model_parallel builds the expert-parallel group only for MoE models, so groups kept from a dense
    scenario would fail every MoE scenario after it (and an MoE scenario's would leak into dense ones)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state

    parallel_state.destroy_model_parallel()
    with set_current_vllm_config(vc):
        parallel_state.initialize_model_parallel(1, 1)
    try:
        parallel_state.get_ep_group()
    except AssertionError:  # what get_ep_group raises when no expert-parallel group was built
        return {"moe": vc.model_config.is_moe, "expert_parallel": False}
    return {"moe": vc.model_config.is_moe, "expert_parallel": True}


def load_weights(vc, target, drafter) -> dict:
    """Every tensor of a real checkpoint through the built models' own load_weights (meta: names and shapes)."""
    from safetensors.torch import load_file
    from vllm.config import set_current_vllm_config

    loaded = {}
    spec = vc.speculative_config
    with set_current_vllm_config(vc), _on_meta():
        for side, model, folder in (("target", target, vc.model_config.model),
                                    ("draft", drafter, spec.draft_model_config.model if spec else None)):
            if model is not None and folder:
                tensors = load_file(str(Path(folder) / "model.safetensors"))  # tiny; copied into meta: shapes only
                loaded[side] = len(model.load_weights(iter(tensors.items())) or tensors)
    return loaded


def _on_meta():
    """torch.device("meta") that also catches explicit device="cuda" buffers (the runner's own constructors)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            device = kwargs.get("device")
            if device is not None and torch.device(device).type == "cuda":
                kwargs["device"] = torch.device("meta")
            if func in (torch.Tensor.cuda, torch.Tensor.pin_memory):
                return args[0].to("meta")
            if func is torch.Tensor.to and args[1:] and isinstance(args[1], (str, torch.device)) \
                    and torch.device(args[1]).type == "cuda":
                args = (args[0], torch.device("meta"), *args[2:])
            return func(*args, **kwargs)

    return CudaToMeta()


class _NoStream:
    """Stands in for torch.cuda.Stream/Event objects the constructors create (side streams for later kernels)."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _no_device_objects() -> None:
    import torch

    torch.cuda.Stream = torch.cuda.Event = _NoStream
    torch.cuda.current_device = lambda: 0  # what current_platform.current_device() asks for layer buffers


def _build_on_meta(vllm_config, model_config=None, prefix: str = ""):
    """What the model loader does up to loading weights, on the meta device (no memory, no kernel)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    model_config = model_config or vllm_config.model_config
    with set_current_vllm_config(vllm_config), set_default_torch_dtype(model_config.dtype), torch.device("meta"), \
            _on_meta():
        return initialize_model(vllm_config=vllm_config, model_config=model_config, prefix=prefix)


def _route_draft_loads_to_meta() -> None:
    """The speculators' loaders call get_model; here it builds on meta instead of loading weights."""
    import vllm.model_executor.model_loader as loader

    stand_in = lambda vllm_config, model_config=None, prefix="", **_: _build_on_meta(  # noqa: E731
        vllm_config, model_config, prefix)
    loader.get_model = stand_in
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm.v1.worker.gpu.spec_decode") and hasattr(module, "get_model"):
            module.get_model = stand_in


def build(vc):
    """Target and drafter as GPUModelRunner.load_model builds them: returns (target, speculator or None)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker.gpu.spec_decode import init_speculator

    target = _build_on_meta(vc)
    if vc.speculative_config is None:
        return target, None
    with set_current_vllm_config(vc), _on_meta():
        speculator = init_speculator(vc, torch.device("meta"), None)
        _route_draft_loads_to_meta()
        speculator.load_model(target)
    return target, speculator


def renderer(vc):
    """The renderer LLMEngine builds first (tokenizer; multimodal processor unless every limit is 0)."""
    from vllm.renderers import renderer_from_config

    built = renderer_from_config(vc)
    return type(built).__name__

