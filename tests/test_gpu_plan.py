"""gpu-check's engine plan (tests/scripts/gpu_plan.py) and its pool's limits (gpu_pool.py), with small Python processes
standing in for the engines (the engines need a GPU). The plan's per-engine seconds are estimates no GPU has measured:
the first test checks how the plan is built and summed, not that a GPU meets it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gpu_check  # noqa: E402
import gpu_plan  # noqa: E402
import gpu_pool  # noqa: E402
import gpu_scenarios  # noqa: E402


def test_the_whole_check_is_planned_within_the_budget_with_the_warm_up_alone_first(tmp_path):
    shared = {}
    needs = {s.name: gpu_check.jobs_for(s, tmp_path, tmp_path / "logs", shared) for s in gpu_scenarios.SCENARIOS}
    jobs = gpu_plan.plan(list(dict.fromkeys(j for roles in needs.values() for j in roles.values())))
    assert jobs[0].name == gpu_plan.WARMUP and jobs[0].timeout == gpu_plan.TIMEOUT["warmup"]
    assert [gpu_plan.kind(j) for j in jobs[1:8]] == ["constructed"] * 7
    assert len(jobs) == 31
    assert gpu_plan.estimate(jobs, gpu_scenarios.PARALLEL) <= gpu_plan.BUDGET_SECONDS
    lines = gpu_plan.lines(needs, jobs, gpu_scenarios.PARALLEL)
    assert lines[-1].startswith("plan: 31 engines, ~") and "of the 600 s budget" in lines[-1]
    assert "plan glm5-text-mtp3: 1 engine(s) ~45 s (+1 shared)" in lines


def test_the_estimate_runs_the_warm_up_alone_then_fills_the_free_slots():
    jobs = [gpu_pool.Job(n, {"engine": {"model": m}}, Path("log")) for n, m in
            [(gpu_plan.WARMUP, "glm5_text"), ("a", "constructed_llama"), ("b", "glm4"), ("c", "glm4"), ("d", "glm4")]]
    jobs = gpu_plan.plan(jobs)
    assert gpu_plan.estimate(jobs, 3) == 150 + 25 + 45  # a, b, c at once after the warm-up; d takes a's slot


def _engine(tmp_path: Path, body: str) -> list[str]:
    """A stand-in engine: `body` runs with `out` (the result path) defined."""
    script = tmp_path / "engine.py"
    script.write_text("import json, sys, time\nout = sys.argv[2]\n" + body)
    return [sys.executable, str(script)]


def _run(monkeypatch, tmp_path, body: str, count: int = 1, **kwargs) -> list[gpu_pool.Job]:
    monkeypatch.setattr(gpu_pool, "ENGINE_COMMAND", _engine(tmp_path, body))
    jobs = [gpu_pool.Job(f"job{i}", {"engine": {}}, tmp_path / f"job{i}.log", timeout=kwargs.pop("timeout", 60),
                         estimate=kwargs.pop("estimate", 0.0)) for i in range(count)]
    ended = []
    gpu_pool.run(jobs, 3, tmp_path / "cache", lambda job: ended.append((job.name, time.time())), **kwargs)
    return jobs, ended


def test_a_silent_engine_is_killed_as_hung(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_pool, "SILENCE_SECONDS", 1)
    (job,), _ = _run(monkeypatch, tmp_path, "print('loading', flush=True)\ntime.sleep(60)\n")
    assert job.result["error"].startswith("killed: hung, no log output for ")
    assert job.result["process_seconds"] < 10


def test_an_engine_still_logging_at_its_limit_is_killed_as_too_slow(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_pool, "SILENCE_SECONDS", 5)
    (job,), _ = _run(monkeypatch, tmp_path, "while True:\n    print('compiling', flush=True)\n    time.sleep(0.2)\n",
                     timeout=2)
    assert job.result["error"].startswith("killed: still running after its 2 s limit, log still moving")


def test_a_job_that_would_end_past_the_deadline_is_not_started(monkeypatch, tmp_path):
    (job,), _ = _run(monkeypatch, tmp_path, "raise SystemExit('must not start')\n", estimate=100,
                     deadline=time.time() + 10)
    assert job.result["ok"] is False and job.result["error"].startswith("not started: 100 s expected, the budget")
    assert not job.log.exists()


def test_the_warm_up_runs_alone_before_the_others_start(monkeypatch, tmp_path):
    body = "open(out, 'w').write(json.dumps({'ok': True, 'began': time.time()}))\ntime.sleep(1)\n"
    jobs, ended = _run(monkeypatch, tmp_path, body, count=3, solo_first=True)
    warm_up_end = dict(ended)["job0"]
    assert all(job.result["ok"] for job in jobs)
    assert all(job.result["began"] > warm_up_end - 1 for job in jobs[1:])  # written before its 1 s sleep
    assert jobs[0].result["began"] < min(job.result["began"] for job in jobs[1:]) - 0.9


def test_an_engine_that_exits_keeps_its_exit_status(monkeypatch, tmp_path):
    (job,), _ = _run(monkeypatch, tmp_path, "raise SystemExit(1)\n")
    assert job.result["error"].startswith("engine exited 1")
