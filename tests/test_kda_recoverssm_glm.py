"""vLLM's RecoverSSM kernels (written for Kimi-K3's KDA) give GLM-5.3-Flash's KDA the state its own stored-states
kernel gives, on the CPU under Triton's interpreter (tests/scripts/kda_recoverssm_glm.py).

GLM's head dim (128), a k = 7 window, every accepted count 1..8 in one batch of 8 requests, fp32 and bf16 states,
2 heads per rank (heads are independent programs of both kernels; GLM has 8 per rank at TP8, which only multiplies
the interpreter's time). The short convolution is compared through the next window: GLM reads its history at the
accepted offset, RecoverSSM moves it to the front at commit. Prefix-cache checkpoints (the commit's align mode, Mamba
block 8) are compared on every state block of each request's block table; their conv histories are not. The
comparison without prefix caching is `vllm._fork.recoverssm_check.compare`, which the fork runs on the user's GPU
before a GLM KDA layer with --use-replayssm is built; here it runs on the CPU, also with a planted fault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parent / "scripts" / "kda_recoverssm_glm.py"
REQUESTS, WINDOW, HEADS, HEAD_DIM = 8, 8, 2, 128
# fp32: the commit folds the accepted corrections in another order than the step-by-step kernel; ≤ 8 terms of
# relative error 2^-24 each stay far below 1e-5. bf16: both paths keep the state in fp32 within the window and round
# it once when storing, so they may differ by at most one bf16 step at the state's largest magnitude.
STATE_TOLERANCE = {"float32": lambda scale: 1e-5 * max(scale, 1.0), "bfloat16": lambda scale: scale * 2 ** -8}


@pytest.fixture(scope="module")
def compared() -> dict:
    done = subprocess.run([sys.executable, str(SCRIPT), *map(str, (REQUESTS, WINDOW, HEADS, HEAD_DIM))],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("dtype", sorted(STATE_TOLERANCE))
def test_the_start_up_check_passes_on_correct_kernels(compared, dtype):
    """vllm._fork.recoverssm_check.compare, the comparison the fork runs on the user's GPU: verify outputs, committed
    states and the next window's convolution within its own tolerances (relative to their largest magnitudes). It
    runs under the defaults a model's construction sets (another default device, bf16), as it does in the engine."""
    result = compared[dtype]["comparison"]
    assert result["output"] <= 2 ** -7 and result["state"] <= STATE_TOLERANCE[dtype](1.0), result
    # Same values through the same convolution kernel: exactly equal.
    assert result["conv"] == 0.0, result


def test_the_start_up_check_fails_on_a_commit_one_token_short(compared):
    """The planted off-by-one (the commit folds in one accepted token fewer, fp32 states) misses the states and the
    next window's convolution, and the start-up check names both."""
    from vllm._fork.recoverssm_check import Comparison

    result = compared["float32"]["planted"]
    assert result["state"] > 100 * STATE_TOLERANCE["float32"](1.0) and result["conv"] > 0.01, result
    failure = Comparison(**result).failure(torch.float32)
    assert "committed states" in failure and "next window's convolution" in failure, failure


@pytest.mark.parametrize("dtype", sorted(STATE_TOLERANCE))
def test_with_prefix_caching_each_completed_block_holds_its_last_tokens_state(compared, dtype):
    """Align mode: windows starting at 8 offsets inside a block; those that complete a block (some, not all) leave
    the state after its last token there, the final state in the last token's block, every other block as it was.
    One position too few folded in misses."""
    result = compared[dtype]
    assert sorted(result["accepted"]) == list(range(1, WINDOW + 1))
    assert 0 < result["aligned_crossings"] < len(result["accepted"]), result
    for error, planted, scale in zip(result["aligned_state_error"], result["aligned_planted_state_error"],
                                     result["state_scale"]):
        assert error <= STATE_TOLERANCE[dtype](scale) and planted > 100 * STATE_TOLERANCE[dtype](scale), result
