"""The one stand-in config-only probes need on vLLM 0.34.0's CPU platform of this machine."""

from __future__ import annotations

import sys
from contextlib import contextmanager


@contextmanager
def without_triton_cpu():
    """CpuPlatform.check_and_update_config (vllm/platforms/cpu.py) refuses x86 without triton-cpu, which the
    package index this project reaches does not carry; building a config runs no kernel, so the refusal says
    nothing about what a probe checks. Only while configs are built: modules built later must see no Triton."""
    import vllm.triton_utils

    before, vllm.triton_utils.HAS_TRITON = vllm.triton_utils.HAS_TRITON, True
    try:
        yield
    finally:  # modules imported meanwhile bound the flag by name: give them this machine's answer too
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("vllm") and getattr(module, "HAS_TRITON", None) is True:
                module.HAS_TRITON = before
