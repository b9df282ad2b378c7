"""The RecoverSSM PR's layer tests run here, on the CPU under Triton's interpreter, in their own process.

In the suite's own process they skip: their kernels need CUDA or TRITON_INTERPRET=1, which Triton reads when a
kernel module is imported, long before this file runs. The PR test (upstream-prs/tests/models/glm5next/) builds
GLM-5.3-Flash's real KDA layer twice on the same weights (GDN metadata, one state slot per draft position; Kimi-K3's
KDA metadata, one slot per request and the runner's RecoverSSM commit), verifies two windows of 8 requests that
accept every count 1..8, and compares the outputs and committed states, fp32 and bf16 states, with a planted commit
one token short that must miss.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PR_TEST = Path(__file__).parents[1] / "upstream-prs" / "tests" / "models" / "glm5next" / "test_glm5next_recoverssm.py"


def test_recoverssm_layer_tests_run_and_pass_under_the_interpreter(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "--tb=short",
                           "--basetemp", str(tmp_path / "pytest"), str(PR_TEST)],
                          capture_output=True, text=True, timeout=900, check=False, cwd=PR_TEST.parents[4],
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1"))
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # Every test ran: none skipped or deselected, so the layer comparisons are not silently left out.
    assert re.fullmatch(r"=* ?\d+ passed in .*", summary), summary
