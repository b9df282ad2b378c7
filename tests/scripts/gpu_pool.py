"""gpu-check's engine processes: each engine its own process (gpu_engine.py), up to `parallel` at once on one GPU.

Every engine gets the same compile and JIT caches (torch.compile, Triton, FlashInfer) under CACHE, so the second
engine of a shape loads what the first compiled, in this run and the next. The first job may run alone (the warm-up
that fills those caches cold). An engine is killed when its log has been silent for SILENCE_SECONDS (hung) or when it
runs past its own limit while still logging (a cold compile or a generate too slow for the budget); either is its
scenario's failure, with the reason, and the pool goes on. A job that could no longer finish before the deadline is
not started and says so.
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
ENGINE_COMMAND = [sys.executable, str(HERE / "gpu_engine.py")]  # + request.json out.json
ENGINE_TIMEOUT = 420
# vLLM logs every stage of a start (weights, profiling, compile ranges, graph capture) and the generate's progress;
# this long without a new byte in an engine's log means it hangs, however long it may take in all.
SILENCE_SECONDS = 150


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
    timeout: float = ENGINE_TIMEOUT  # its own limit (the warm-up compiles cold and gets more)
    estimate: float = 0.0  # what the plan expects it to take (gpu_plan.py), for the deadline
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _scratch: Path | None = field(default=None, repr=False)
    _started: float = 0.0


def _start(job: Job, env: dict) -> None:
    job._scratch = Path(tempfile.mkdtemp(prefix="gpu-engine-"))
    (job._scratch / "request.json").write_text(json.dumps(job.request))
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with job.log.open("w") as sink:
        job._proc = subprocess.Popen([*ENGINE_COMMAND, str(job._scratch / "request.json"),
                                      str(job._scratch / "out.json")], stdout=sink, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env})
    job._started = time.time()


def _finish(job: Job, code) -> None:
    out = job._scratch / "out.json"
    if code == 0 and out.exists():
        job.result = json.loads(out.read_text())
    else:
        tail = " | ".join(job.log.read_text(errors="replace").strip().splitlines()[-3:])
        why = code if isinstance(code, str) else f"engine exited {code}"
        job.result = {"ok": False, "error": f"{why}: {tail}"}
    job.result["process_seconds"] = round(time.time() - job._started, 1)
    job.result["log_text"] = job.log.read_text(errors="replace")[-200_000:]
    for name in ("request.json", "out.json"):
        (job._scratch / name).unlink(missing_ok=True)
    job._scratch.rmdir()


def _kill_reason(job: Job, now: float) -> str | None:
    """Why a running engine must stop now, or None: silent too long (hung), or past its limit while logging."""
    silent = now - max(job._started, job.log.stat().st_mtime)
    if silent > SILENCE_SECONDS:
        return f"killed: hung, no log output for {silent:.0f} s"
    if now - job._started > job.timeout:
        return f"killed: still running after its {job.timeout:.0f} s limit, log still moving (cold compile or slow)"
    return None


def _not_started(job: Job, deadline: float) -> None:
    job.result = {"ok": False, "error": f"not started: {job.estimate:.0f} s expected, the budget ends in "
                                        f"{max(0.0, deadline - time.time()):.0f} s", "process_seconds": 0.0}


def run(jobs: list[Job], parallel: int, cache: Path, done=lambda job: None, solo_first: bool = False,
        deadline: float | None = None) -> None:
    """Run every job, `parallel` at a time (the first alone when solo_first); call done(job) as each one ends (the
    report is written there). Past `deadline` (a time.time()), a job expected to overrun it is not started."""
    env = cache_env(cache)
    waiting, running = list(jobs), []
    while waiting or running:
        limit = 1 if solo_first and len(waiting) + len(running) == len(jobs) else parallel
        while waiting and len(running) < limit:
            job = waiting.pop(0)
            if deadline is not None and time.time() + job.estimate > deadline:
                _not_started(job, deadline)
                done(job)
                continue
            _start(job, env)
            running.append(job)
        time.sleep(0.5)
        for job in list(running):
            code = job._proc.poll()
            reason = _kill_reason(job, time.time()) if code is None else None
            if reason:
                job._proc.kill()
                job._proc.wait()
                code = reason
            if code is not None:
                running.remove(job)
                _finish(job, code)
                done(job)
