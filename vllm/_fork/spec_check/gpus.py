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
    capability: str  # SM version for NVIDIA, gfx target for AMD

    def describe(self) -> str:
        return f"{self.name} ({self.memory_bytes / GIB:.0f} GiB, {self.capability})"


GPUS = {
    "h100": Gpu("H100 80GB", "nvidia", 80 * GIB, "sm90"),
    "h200": Gpu("H200", "nvidia", 141 * GIB, "sm90"),
    "b200": Gpu("B200", "nvidia", 180 * GIB, "sm100"),
    "mi300x": Gpu("MI300X", "amd", 192 * GIB, "gfx942"),
    "mi355x": Gpu("MI355X", "amd", 288 * GIB, "gfx950"),
}
