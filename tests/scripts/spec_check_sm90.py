"""spec-check as it runs on one H100/H200 host, on this CPU: `spec_check_sm90.py LIBCUDA GPU CASES.json OUT.json`.

The benchmark's stand-in SM90 platform (benchmarks/glm5_kv/sm90_stub.py: vLLM's own CUDA platform answering device
queries, the compiled kernels loadable, none run) replaces spec-check's config-only stand-in, so the KV plan is made
as on the GPU host: the models built on the meta device with the backends vLLM picks there, then vLLM's planner.
CASES.json and OUT.json are spec_check_batch.py's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks" / "glm5_kv"), str(Path(__file__).resolve().parent)]

import sm90_stub  # noqa: E402  (no vllm import may precede sm90_stub.install)

if __name__ == "__main__":
    libcuda, gpu, cases, out = sys.argv[1:5]
    sm90_stub.install(gpu, Path(libcuda))
    from spec_check_batch import run_all

    results = run_all(json.loads(Path(cases).read_text()))
    Path(out).write_text(json.dumps(results, indent=1))
