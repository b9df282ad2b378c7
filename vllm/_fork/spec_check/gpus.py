"""Target GPUs spec-check knows: vendor (which platform classes load), memory and compute capability."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class Gpu:
    """One accelerator model as vLLM would see it on the serving host."""

    name: str
    vendor: str  # "nvidia" or "amd": picks the platform-specific model classes (vllm/models/*/nvidia|amd)
    memory_bytes: int
    capability: tuple[int, int]  # as vLLM's DeviceCapability reports it (ROCm: the gfx major/minor)
    target: str  # the compiler's name for it: SM version for NVIDIA, gfx target for AMD

    def describe(self) -> str:
        return f"{self.name} ({self.memory_bytes / GIB:.0f} GiB, {self.target})"


GPUS = {
    "h100": Gpu("H100 80GB", "nvidia", 80 * GIB, (9, 0), "sm90"),
    "h200": Gpu("H200", "nvidia", 141 * GIB, (9, 0), "sm90"),
    "b200": Gpu("B200", "nvidia", 180 * GIB, (10, 0), "sm100"),
    "mi300x": Gpu("MI300X", "amd", 192 * GIB, (9, 4), "gfx942"),
    "mi355x": Gpu("MI355X", "amd", 288 * GIB, (9, 5), "gfx950"),
}
