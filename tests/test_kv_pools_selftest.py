"""KV pools' kernel comparison (vllm/_fork/kv_pools_selftest.py) on the CPU under Triton's interpreter: vLLM's own
write and attention kernels find a carved slot equal to the stock block on the plans the fork's carver cuts, and a
fault planted into the real carver, block pool or pooled config (tests/scripts/kv_pools_plants.py) is caught with a line naming the group and kernel.

Run through tests/scripts/kv_pools_kernel_check.py, the script a GPU host runs natively (fp32 here: the interpreter's
bf16 dot gives garbage).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "scripts" / "kv_pools_kernel_check.py"


def _check(*args: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1"))
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


def test_a_correct_carve_reads_and_writes_like_the_stock_block():
    code, results = _check()
    assert code == 0
    assert {name: result["slots"] for name, result in results.items()} == {
        "full-attention-layer-outermost": [2, 1], "sliding-window-layer-outermost": [2, 1],
        "sliding-window-block-outermost": [3, 1]}
    assert all(result["findings"] == [] for result in results.values())


# One process for every fault (each planted alone, in turn): the interpreter's import is most of a run's time.
PLANTED = {"slot-offset": ("TRITON_ATTN write", "bytes differ"),
           "overlapping-pages": ("TRITON_ATTN write", "bytes differ"),
           "block-base": ("TRITON_ATTN write", "bytes differ"),
           "read-elsewhere": ("TRITON_ATTN read", "the read does not see the cache it was given"),
           "num-blocks": ("views", "the carved views address 4 blocks; the pool hands out ids up to 11")}


@pytest.fixture(scope="module")
def planted() -> dict:
    code, results = _check(*(arg for plant in PLANTED for arg in ("--plant", plant)),
                           "--only", "sliding-window-block-outermost")
    assert code == 1
    return results


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_a_planted_fault_is_a_finding_naming_the_group_and_kernel(planted, plant):
    kernel, detail = PLANTED[plant]
    (finding,) = planted[plant]["sliding-window-block-outermost"]["findings"]
    assert finding.startswith(f"KV group 0: {kernel}: ") and detail in finding
