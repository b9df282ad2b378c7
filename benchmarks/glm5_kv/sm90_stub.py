"""A stand-in CUDA SM90 (H100/H200) platform so vLLM plans KV caches on a CPU-only host."""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

GIB = 1 << 30
# name -> (what NVML would report, total device memory in bytes)
GPUS = {
    "H100": ("NVIDIA H100 80GB HBM3", 80 * GIB),
    "H200": ("NVIDIA H200", 141 * GIB),
}
STUB_SOURCE = Path(__file__).resolve().parent / "libcuda_stub.c"


def build_libcuda_stub(out_dir: Path) -> Path:
    """Compile libcuda_stub.c into out_dir/libcuda.so.1 and return its path."""
    out = Path(out_dir) / "libcuda.so.1"
    subprocess.check_call(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1",
                           "-o", str(out), str(STUB_SOURCE)])
    return out


class _NoStream:
    """Stands in for torch.cuda.Stream: nothing ever runs on it."""

    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args, **kwargs):
        pass


def install(gpu: str, libcuda: Path):
    """Patch the process to look like one SM90 GPU of an 8-GPU host; call before importing vllm."""
    # vllm binds current_platform at import time, so this must run first.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cuda")
    # The wheel's compiled ops link against libcuda.so.1; without a driver they fail to
    # import, and vllm/platforms/cuda.py imports one unconditionally. The stub only lets
    # them load: every cu* call returns CUDA_ERROR_NO_DEVICE, no kernel ever runs.
    ctypes.CDLL(str(libcuda), mode=ctypes.RTLD_GLOBAL)

    # With no active Triton driver vLLM sets HAS_TRITON=False, which picks the V1 model
    # runner; that runner rejects DFlash candidate-head drafts, so the plan would differ.
    from triton.backends.nvidia.driver import CudaDriver

    CudaDriver.is_active = staticmethod(lambda: True)

    # flash_linear_attention (imported by GLM's KDA layer) queries the device at import.
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver as triton_driver

    class _Utils:
        @staticmethod
        def get_device_properties(device):
            return {"max_shared_mem": 232448, "multiprocessor_count": 132,
                    "sm_clock_rate": 1980000, "mem_clock_rate": 2619000,
                    "mem_bus_width": 5120}

    class _TritonSM90:
        utils = _Utils()

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_active_torch_device(self):
            return torch.device("cuda", 0)

    triton_driver.set_active(_TritonSM90())
    # A MoE's shared experts ask for an auxiliary stream while they are built; there is none to give.
    torch.cuda.Stream = _NoStream
    torch.cuda.current_stream = lambda *args, **kwargs: _NoStream()
    torch.cuda.current_device = lambda: 0  # Qwen3-Next's GDN layer asks while it is built
    dev_name, total_mem = GPUS[gpu]
    torch.cuda.get_device_name = lambda *a, **k: dev_name
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)

    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability

    # Only device queries are answered here; every policy (backend choice, block-size
    # alignment, check_and_update_config) stays the stock CudaPlatformBase code.
    class SM90StubPlatform(CudaPlatformBase):
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(major=9, minor=0)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return dev_name

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return f"GPU-stub-{device_id}"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return total_mem

        @classmethod
        def is_fully_connected(cls, device_ids) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return 8

        @classmethod
        def get_device_numa_node(cls, device_id: int = 0):
            return None

        @classmethod
        def get_all_device_numa_nodes(cls):
            return None

        @classmethod
        def is_pin_memory_available(cls) -> bool:
            return False

        @classmethod
        def log_warnings(cls):
            pass

    assert platforms._current_platform is None, "vllm.platforms was resolved before the stub"
    platforms._current_platform = SM90StubPlatform()
    return platforms._current_platform
