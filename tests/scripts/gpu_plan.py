"""gpu-check's engine plan: the order, each engine's limit and expected time, and the whole run's estimate against
the 10-minute budget, printed before the first engine starts.

The warm-up is the GLM-5.3-Flash text base run: its compile covers the sparse MLA, indexer, KDA and fp32-head kernels
that most later engines load from the shared caches, so it runs alone and gets the cold limit. Every number here is
an estimate until a GPU run measures it (report.json keeps each engine's measured seconds beside its estimate).
"""

from __future__ import annotations

import heapq

BUDGET_SECONDS = 600
WARMUP = "base-glm5_text-auto-short"
# Expected seconds per engine (import, build, load, profile, CUDA graphs up to 64 tokens, generate), never measured.
ESTIMATE = {"warmup": 150.0, "constructed": 25.0, "random": 45.0}
# Limits per engine; SILENCE_SECONDS in gpu_pool.py catches a hang much earlier.
TIMEOUT = {"warmup": 420.0, "constructed": 180.0, "random": 240.0}


def kind(job) -> str:
    if job.name == WARMUP:
        return "warmup"
    return "constructed" if "constructed" in job.request["engine"]["model"] else "random"


def plan(jobs: list) -> list:
    """The jobs in run order, each with its limit and estimate set: the warm-up first, then constructed engines
    (tiny, the sharpest answer), then the rest in scenario order."""
    for job in jobs:
        job.timeout, job.estimate = TIMEOUT[kind(job)], ESTIMATE[kind(job)]
    rank = {"warmup": 0, "constructed": 1, "random": 2}
    return sorted(jobs, key=lambda job: rank[kind(job)])  # stable: scenario order within a kind


def estimate(jobs: list, parallel: int) -> float:
    """Seconds the planned jobs take: the warm-up alone (when first), then each job on the first free of `parallel`
    slots."""
    start = 0.0
    if jobs and kind(jobs[0]) == "warmup":
        start, jobs = jobs[0].estimate, jobs[1:]
    slots = [start] * parallel
    for job in jobs:
        heapq.heappush(slots, heapq.heappop(slots) + job.estimate)
    return max(slots)


def lines(needs: dict, jobs: list, parallel: int) -> list[str]:
    """What gpu-check prints before starting: per scenario its engines (a shared base counted where it first runs),
    then the whole run's estimate."""
    seen, out = set(), []
    for name, roles in needs.items():
        new = [job for job in roles.values() if id(job) not in seen]
        seen.update(id(job) for job in new)
        shared = len(roles) - len(new)
        out.append(f"plan {name}: {len(new)} engine(s) ~{sum(j.estimate for j in new):.0f} s"
                   + (f" (+{shared} shared)" if shared else ""))
    how = "the warm-up alone, then " if jobs and kind(jobs[0]) == "warmup" else ""
    out.append(f"plan: {len(jobs)} engines, ~{estimate(jobs, parallel):.0f} s ({how}{parallel} at once) of the "
               f"{BUDGET_SECONDS} s budget (estimates; a job that would end past the budget is not started)")
    return out
