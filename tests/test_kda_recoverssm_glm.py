"""vLLM's RecoverSSM kernels (written for Kimi-K3's KDA) give GLM-5.3-Flash's KDA the state its own stored-states
kernel gives, on the CPU under Triton's interpreter (tests/scripts/kda_recoverssm_glm.py).

GLM's head dim (128), a k = 7 window, every accepted count 1..8 in one batch of 8 requests, fp32 and bf16 states,
2 heads per rank (heads are independent programs of both kernels; GLM has 8 per rank at TP8, which only multiplies
the interpreter's time). The short convolution is compared through the next window: GLM reads its history at the
accepted offset, RecoverSSM moves it to the front at commit. Prefix-cache checkpoints (the commit's align mode, Mamba
block 8) are compared on every state block of each request's block table; their conv histories are not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
def test_the_committed_state_is_the_stored_state_of_the_last_accepted_position(compared, dtype):
    result = compared[dtype]
    assert sorted(result["accepted"]) == list(range(1, WINDOW + 1))
    for error, scale in zip(result["state_error"], result["state_scale"]):
        assert scale > 0.1 and error <= STATE_TOLERANCE[dtype](scale), result


@pytest.mark.parametrize("dtype", sorted(STATE_TOLERANCE))
def test_verify_outputs_are_the_stored_paths_outputs(compared, dtype):
    """Outputs are bf16 activations: at most one bf16 step at their largest magnitude."""
    result = compared[dtype]
    assert result["output_error"] <= result["output_scale"] * 2 ** -7, result


@pytest.mark.parametrize("dtype", sorted(STATE_TOLERANCE))
def test_folding_one_position_too_few_is_caught(compared, dtype):
    """The planted off-by-one in the replay (accepted - 1 positions folded in) misses every request's state."""
    result = compared[dtype]
    for error, scale in zip(result["planted_state_error"], result["state_scale"]):
        assert error > 100 * STATE_TOLERANCE[dtype](scale), result


def test_the_next_windows_convolution_reads_the_same_history(compared):
    """Same values through the same kernel: exactly equal; a history moved one position short differs (a request
    that accepted one token has nothing to move). Run once: the conv state does not depend on the state dtype."""
    result = compared["float32"]
    assert result["conv_error"] == [0.0] * len(result["accepted"]), result
    moved = [error for error, accepted in zip(result["planted_conv_error"], result["accepted"]) if accepted > 1]
    assert len(moved) == WINDOW - 1 and min(moved) > 0.01 * result["conv_scale"], result


@pytest.mark.parametrize("dtype", sorted(STATE_TOLERANCE))
def test_with_prefix_caching_each_completed_block_holds_its_last_tokens_state(compared, dtype):
    """Align mode: windows starting at 8 offsets inside a block; those that complete a block (some, not all) leave
    the state after its last token there, the final state in the last token's block, every other block as it was.
    One position too few folded in misses."""
    result = compared[dtype]
    assert 0 < result["aligned_crossings"] < len(result["accepted"]), result
    for error, planted, scale in zip(result["aligned_state_error"], result["aligned_planted_state_error"],
                                     result["state_scale"]):
        assert error <= STATE_TOLERANCE[dtype](scale) and planted > 100 * STATE_TOLERANCE[dtype](scale), result
