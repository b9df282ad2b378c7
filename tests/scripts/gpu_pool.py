"""gpu-check's engine processes: each engine its own process (gpu_engine.py), up to `parallel` at once on one GPU.

Every engine gets the same compile and JIT caches (torch.compile, Triton, FlashInfer) under CACHE, so the second
engine of a shape loads what the first compiled, in this run and the next. A hung engine is killed at its timeout
and is its scenario's failure; the pool goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINE_TIMEOUT = 420


def cache_env(cache: Path) -> dict:
    """Compile and JIT caches shared by every engine (and kept for the next run)."""
    return {"VLLM_CACHE_ROOT": str(cache / "vllm"), "TRITON_CACHE_DIR": str(cache / "triton"),
            "FLASHINFER_WORKSPACE_BASE": str(cache / "flashinfer"), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor")}


@dataclass(eq=False)  # a job is itself: jobs shared by scenarios are deduplicated by identity
class Job:
    """One engine to run: its request (gpu_engine.py) and log; result filled in when it ends."""

    name: str
    request: dict
    log: Path
    result: dict | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _scratch: Path | None = field(default=None, repr=False)
    _started: float = 0.0


def _start(job: Job, env: dict) -> None:
    job._scratch = Path(tempfile.mkdtemp(prefix="gpu-engine-"))
    (job._scratch / "request.json").write_text(json.dumps(job.request))
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with job.log.open("w") as sink:
        job._proc = subprocess.Popen([sys.executable, str(HERE / "gpu_engine.py"), str(job._scratch / "request.json"),
                                      str(job._scratch / "out.json")], stdout=sink, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env})
    job._started = time.time()


def _finish(job: Job, code) -> None:
    out = job._scratch / "out.json"
    if code == 0 and out.exists():
        job.result = json.loads(out.read_text())
    else:
        tail = " | ".join(job.log.read_text(errors="replace").strip().splitlines()[-3:])
        job.result = {"ok": False, "error": f"engine exited {code}: {tail}"}
    job.result["process_seconds"] = round(time.time() - job._started, 1)
    job.result["log_text"] = job.log.read_text(errors="replace")[-200_000:]
    for name in ("request.json", "out.json"):
        (job._scratch / name).unlink(missing_ok=True)
    job._scratch.rmdir()


def run(jobs: list[Job], parallel: int, cache: Path, done=lambda job: None, timeout: float = ENGINE_TIMEOUT) -> None:
    """Run every job, `parallel` at a time; call done(job) as each one ends (the report is written there)."""
    env = cache_env(cache)
    waiting, running = list(jobs), []
    while waiting or running:
        while waiting and len(running) < parallel:
            job = waiting.pop(0)
            _start(job, env)
            running.append(job)
        time.sleep(0.5)
        for job in list(running):
            code = job._proc.poll()
            if code is None and time.time() - job._started > timeout:
                job._proc.kill()
                job._proc.wait()
                code = f"killed after {timeout} s"
            if code is not None:
                running.remove(job)
                _finish(job, code)
                done(job)
