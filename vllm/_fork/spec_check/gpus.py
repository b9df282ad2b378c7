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


# Memory as each vendor's data sheet states it (NVIDIA's GB200 NVL72: up to 186 GB per GPU). GeForce RTX 3090: 24 GB
# GDDR6X (NVIDIA's launch spec, GA102); RTX A6000: 48 GB GDDR6 (its spec table, servethehome.com); both Ampere GA102,
# SM86. DGX Spark: GB10, sm_121, 128 GB LPDDR5X shared by CPU and GPU (NVIDIA's spec sheet as mirrored at
# dgx-spark.warehack.ing/hardware): given in decimal gigabytes, since the GPU sees about 119.7 GB of it.
GPUS = {
    "a100": Gpu("A100 80GB", "nvidia", 80 * GIB, (8, 0), "sm80"),
    "rtx3090": Gpu("GeForce RTX 3090", "nvidia", 24 * GIB, (8, 6), "sm86"),
    "a6000": Gpu("RTX A6000", "nvidia", 48 * GIB, (8, 6), "sm86"),
    "l40s": Gpu("L40S", "nvidia", 48 * GIB, (8, 9), "sm89"),
    "rtx6000-ada": Gpu("RTX 6000 Ada", "nvidia", 48 * GIB, (8, 9), "sm89"),
    "h100": Gpu("H100 80GB", "nvidia", 80 * GIB, (9, 0), "sm90"),
    "h200": Gpu("H200", "nvidia", 141 * GIB, (9, 0), "sm90"),
    "b200": Gpu("B200", "nvidia", 180 * GIB, (10, 0), "sm100"),
    "gb200": Gpu("GB200", "nvidia", 186 * GIB, (10, 0), "sm100"),
    "rtx-pro-6000": Gpu("RTX PRO 6000 Blackwell", "nvidia", 96 * GIB, (12, 0), "sm120"),
    "gb10": Gpu("GB10 (DGX Spark)", "nvidia", 128 * 10**9, (12, 1), "sm121"),
    "mi300x": Gpu("MI300X", "amd", 192 * GIB, (9, 4), "gfx942"),
    "mi355x": Gpu("MI355X", "amd", 288 * GIB, (9, 5), "gfx950"),
}
