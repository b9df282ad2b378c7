"""GPU only (marker gpu, deselected by default): GLM-5.3-Flash-shaped target + MTP and + DFlash2, greedy identical.

Run on a device machine: `pytest -m gpu tests/test_gpu_glm5.py` (one H100/H200, a few minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).parent / "scripts" / "glm5_gpu_greedy.py"


def test_speculation_keeps_greedy_tokens(tmp_path):
    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=1800)
    results = json.loads(out.read_text()) if out.exists() else {}
    assert done.returncode == 0, (results, done.stderr[-3000:])
    assert all(results[name]["identical"] for name in ("mtp", "dflash2", "dflash2_no_prefix_caching"))
    # spec-check's KV plan on the same host: planned, and ", draft N" says the draft group was packed.
    assert "KV tokens" in results["dflash2"]["kv_plan"], results["dflash2"]["kv_plan"]
    assert ", draft " in results["dflash2_no_prefix_caching"]["kv_plan"], results["dflash2_no_prefix_caching"]
