"""`make gpu-check`: the fork's GPU acceptance run on one H100/H200 (TP1), every scenario of gpu_scenarios.py.

Usage: python gpu_check.py [--only NAME ...] [--out DIR] [--parallel N] [--plan]
The engine plan (gpu_plan.py: order, limits, the estimate against the 10-minute budget) is printed first; `--plan`
stops there. The GLM text base runs first and alone (the warm-up that compiles into the shared caches).
Engines (gpu_engine.py, one process each, up to N at once, sharing compile and JIT caches): per random-weights
scenario the target without speculation (greedy, top-5 logprobs, fp32 lm_head; shared by scenarios with the same
target, KV dtype and prompts), the speculative engine, and for packed and pools scenarios the same with
VLLM_FORK_DISABLE_KV_PACKING=1 (the auto scenario's speculative engine runs under the default,
VLLM_FORK_KV_POOLS=auto, and must say its start-up self-test passed). Per constructed scenario the speculative engine
(the prefix scenario with prefix caching off and on). DIR/report.json and DIR/table.txt are rewritten after every
scenario; a scenario's failure keeps its traceback and the versions. Exit 0 all passed, 1 a scenario failed, 2 bad
input, 3 internal error.
Never run here: this project has no GPU (docs/gpu-check.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu_constructed  # noqa: E402
import gpu_plan  # noqa: E402
import gpu_pool  # noqa: E402
import gpu_scenarios  # noqa: E402
import gpu_verdicts as v  # noqa: E402
from gpu_engine import HIGH, LOW  # noqa: E402  (the prompt ids the checkpoints' tokenizer holds)

from vllm._fork.kv_pages import DISABLE_ENV, POOLS_ENV, pools_proven  # noqa: E402
from vllm._fork.vocabulary import Exit, PoolsMode  # noqa: E402

BACKEND_LINE = re.compile(r"Using (\S+) attention backend")
OFF = {DISABLE_ENV: "1"}
# Constructed prompts: 8 requests, several draft blocks each. The prefix scenario sends a 512-token prefix first,
# then 7 prompts extending it (hits align to the scheduler block and EAGLE drops one: several blocks are needed).
CONSTRUCTED_LENGTHS = [200, 240, 280, 320, 360, 400, 440, 480]
PREFIX, SUFFIXES = 512, [16, 40, 64, 88, 112, 136, 160]
# The pools A/B (GLM + DFlash2, prefix caching on): hits align to the scheduler block (640 tokens at bf16 KV), so
# a prefix of 4 blocks first, then 7 prompts extending it, in the tokenizer's ids.
POOLS_PREFIX, POOLS_SUFFIXES = 2560, [100, 300, 500, 700, 900, 1100, 1300]


# Logged once by an engine that opts in on a vLLM release the pools are not ported to (vllm/_fork/kv_pages.py).
GATED_LOG = "KV pools per page size were built and tested on vLLM 0.32-0.34's planners only and are not ported"
# The KV pools' kernel comparison (vllm/_fork/kv_pools_selftest.py) on this GPU: run first, before any engine.
KERNELS = "kv-pools-kernels"


def pools_gated_problems(on: dict, off: dict) -> list[str]:
    """Two scheduler KV configs (gpu_engine.kv_config) on a release the pools are not ported to: VLLM_FORK_KV_POOLS=on
    must plan exactly as the off switch does (a plain config, nothing carved, the same blocks and capacity)."""
    problems = []
    for arm, config in (("pools on", on), ("VLLM_FORK_DISABLE_KV_PACKING=1", off)):
        if config["type"] != "KVCacheConfig" or any(g["slots"] > 1 for g in config["groups"]):
            problems.append(f"{arm}: a {config['type']} with slots {[g['slots'] for g in config['groups']]} on a "
                            f"vLLM the pools are not ported to")
    for key in ("num_blocks", "kv_cache_max_concurrency", "kv_cache_size_tokens"):
        if on[key] != off[key]:
            problems.append(f"{key} {on[key]} with pools opted in, {off[key]} without: not stock's plan")
    return problems


def pools_gated_verdict(on: dict, off: dict) -> list[str]:
    """Both engines of the pools A/B where the pools are not ported: stock's plan in both, the one warning line in
    the opted-in engine's log, no carving line, and the same prefix-cache hits."""
    problems = pools_gated_problems(on["kv_config"], off["kv_config"])
    if GATED_LOG not in on.get("log_text", ""):
        problems.append(f"pools on: no log line '... {GATED_LOG} ...'")
    for arm, run in (("pools on", on), ("VLLM_FORK_DISABLE_KV_PACKING=1", off)):
        if v.POOLS_LOG in run.get("log_text", ""):
            problems.append(f"{arm}: the log says '{v.POOLS_LOG} ...' on a vLLM the pools are not ported to")
    if (on.get("prefix_cache_hits"), on.get("prefix_cache_queries")) != (off.get("prefix_cache_hits"),
                                                                         off.get("prefix_cache_queries")):
        problems.append(f"prefix-cache hits {on.get('prefix_cache_hits')} of {on.get('prefix_cache_queries')} with "
                        f"pools opted in, {off.get('prefix_cache_hits')} of {off.get('prefix_cache_queries')} without")
    return problems


def kernel_check(device: str = "cuda", dtype: str = "bfloat16", timeout: float = 180,
                 backends: tuple[str, ...] = ("TRITON_ATTN", "FLASH_ATTN")) -> dict:
    """The KV pools' kernel comparison on this GPU (kv_pools_kernel_check.py) with Triton's and FlashAttention's
    kernels, a scenario of its own."""
    started, lines, problems = time.time(), [], []
    for backend in backends:
        left = timeout - (time.time() - started)
        try:
            done = subprocess.run([sys.executable, str(HERE / "kv_pools_kernel_check.py"), "--device", device,
                                   "--dtype", dtype, "--backend", backend], capture_output=True, text=True,
                                  timeout=left)
        except subprocess.TimeoutExpired:
            problems.append(f"kv_pools_kernel_check.py --backend {backend} still running after {timeout:.0f} s")
            break
        ran = [f"{backend}: {line}" for line in done.stdout.splitlines()[:-1]]
        lines += ran
        if done.returncode not in (Exit.OK, Exit.FINDINGS):
            problems.append(f"kv_pools_kernel_check.py --backend {backend} exited {done.returncode}: "
                            f"{' | '.join(done.stderr.splitlines()[-3:])}")
        else:
            problems += [line for line in ran if "bitwise" not in line]
    return {"ok": not problems, "problems": problems, "lines": lines, "seconds": round(time.time() - started, 1)}


def request_prompts(kind: str) -> dict:
    """A request's prompts: a gpu_engine prompt kind, or the shared prefix first and then prompts extending it."""
    if kind != "prefix":
        return {"prompts": kind}
    first, *rest = gpu_constructed.siblings(POOLS_PREFIX, POOLS_SUFFIXES, tokens=range(LOW, HIGH + 1))
    return {"prompts": [first], "then": rest}


def base_key(scenario) -> tuple:
    """Scenarios whose target runs alike without speculation share one base run."""
    target = re.sub(r"_mtp\d+$", "", scenario.target)
    prompts = "long" if scenario.packed else "prefix" if scenario.pools else "short"
    return target, scenario.engine.get("kv_cache_dtype", "auto"), prompts


def jobs_for(scenario, work: Path, logs: Path, shared: dict) -> dict:
    """The engines a scenario needs, by role; base runs come from (and go into) `shared`."""
    spec_engine = gpu_scenarios.engine_kwargs(scenario, work)
    job = lambda role, request: gpu_pool.Job(f"{scenario.name}-{role}", request, logs / f"{scenario.name}-{role}.log")  # noqa: E731
    if scenario.constructed:
        if scenario.prefix_ab:  # the prefix finished before the prompts extending it are sent
            first, *rest = gpu_constructed.siblings(PREFIX, SUFFIXES)
            request = {"engine": spec_engine, "prompts": [first], "then": rest}
            on = dict(request, engine=dict(spec_engine, enable_prefix_caching=True))
            return {"spec": job("prefix-off", request), "prefix_on": job("prefix-on", on)}
        return {"spec": job("spec", {"engine": spec_engine, "prompts": gpu_constructed.prompts(CONSTRUCTED_LENGTHS)})}
    key = base_key(scenario)
    if key not in shared:
        plain = dict(spec_engine, speculative_config=None, model=str(work / key[0]))
        shared[key] = gpu_pool.Job(f"base-{'-'.join(key)}", {"engine": plain, **request_prompts(key[2]),
                                                             "logprobs": True, "sharpen": True},
                                   logs / f"base-{'-'.join(key)}.log")
    request = {"engine": spec_engine, **request_prompts(key[2]), "sharpen": True}
    # The auto scenario runs the fork's default, whatever gpu-check opts the other scenarios into.
    auto = {"env": {POOLS_ENV: PoolsMode.AUTO.value}} if scenario.auto_pools else {}
    roles = {"base": shared[key], "spec": job("spec", request | auto)}
    if scenario.packed or scenario.pools or scenario.auto_pools:  # the same engine under the off switch: stock's plan
        roles["packing_off"] = job("packing-off", dict(request, env=OFF))
    return roles


def verdict(scenario, runs: dict) -> list[str]:
    """Every rule that applies to the scenario, on the engines' results."""
    failed = [f"{role}: {r.get('error')}" for role, r in runs.items() if not r.get("ok")]
    if failed:
        return failed
    k = scenario.speculative["num_speculative_tokens"]
    spec_runs = {role: r for role, r in runs.items() if role != "base"}
    problems = []
    for role, run in spec_runs.items():
        problems += [f"{role}: {p}" for p in v.speculation_problems(run, scenario.speculator, k, scenario.constructed)]
        if scenario.constructed:
            problems += [f"{role}: {p}" for p in v.constructed_problems(run, gpu_constructed.continuation)]
        else:
            problems += [f"{role}: {p}" for p in v.greedy_verdict(runs["base"]["tokens"], runs["base"]["topk"],
                                                                  run["tokens"])["problems"]]
            if run["sharpened"]["checksum"] != runs["base"]["sharpened"]["checksum"]:
                problems.append(f"{role}: its lm_head differs from the base run's")
    if not scenario.constructed:
        problems += v.sharpness_problems(runs["base"])
    if scenario.target.startswith("glm5"):
        backends = set(BACKEND_LINE.findall(runs["spec"].get("log_text", "")))
        if "FLASHINFER_MLA_SPARSE_SM90" not in backends:
            problems.append(f"sparse MLA backend {sorted(backends)}, not FLASHINFER_MLA_SPARSE_SM90")
    if scenario.packed:
        problems += v.packing_verdict(runs["spec"], runs["packing_off"])
    if scenario.pools:  # where the engine says the pools are not ported (0.34.0): opting in must keep stock's plan
        gated = not pools_proven() and GATED_LOG in runs["spec"].get("log_text", "")
        problems += (pools_gated_verdict if gated else v.pools_verdict)(runs["spec"], runs["packing_off"])
    if scenario.auto_pools:
        problems += v.auto_pools_verdict(runs["spec"], runs["packing_off"])
    if scenario.prefix_ab:
        problems += v.prefix_cache_problems(runs["prefix_on"], runs["spec"])
    return problems


def row(scenario, runs: dict, problems: list[str]) -> dict:
    slim = {role: {k: x for k, x in r.items() if k not in ("log_text", "topk")} for role, r in runs.items()}
    out = {"ok": not problems, "problems": problems, "runs": slim}
    if "base" in runs and runs["base"].get("ok") and runs["spec"].get("ok"):
        out["greedy"] = v.greedy_verdict(runs["base"]["tokens"], runs["base"]["topk"], runs["spec"]["tokens"])
    return out


def kv_tokens(runs: dict) -> str:
    """The speculative engine's KV capacity in tokens, and the same engine's under the off switch."""
    tokens = [(runs.get(role, {}).get("kv_config") or {}).get("kv_cache_size_tokens") for role in
              ("spec", "packing_off")]
    return " ".join(f"{t:,}" if i == 0 else f"({t:,})" for i, t in enumerate(tokens) if t) or "-"


def table(report: dict) -> str:
    head = ("scenario", "verdict", "speculator", "drafts", "accepted/draft", "compared", "draft block",
            "packing off: accepted/draft", "prefix on: accepted/draft", "KV tokens (off switch)")
    rows = [head]
    per = lambda r: f"{r['accepted'] / r['drafts']:.2f}" if r.get("drafts") else "-"  # noqa: E731
    for name, entry in report.items():
        runs = entry.get("runs", {})
        spec, greedy = runs.get("spec", {}), entry.get("greedy", {})
        draft = [g["block_size"] for g in spec.get("kv_groups", []) if g["draft"]]
        rows.append((name, "ok" if entry["ok"] else "FAILED: " + entry["problems"][0][:70],
                     str(spec.get("speculator", "-")), str(spec.get("drafts", "-")), per(spec),
                     f"{greedy.get('compared', '-')}/{greedy.get('total', '-')}", str(draft or "-"),
                     per(runs.get("packing_off", {})), per(runs.get("prefix_on", {})), kv_tokens(runs)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in rows)


def write(out: Path, report: dict, budget: list, started: float) -> str:
    wall = round(time.time() - started, 1)
    (out / "report.json").write_text(json.dumps({"wall_seconds": wall, "budget_seconds": gpu_plan.BUDGET_SECONDS,
                                                 "engines": budget, "scenarios": report}, indent=1, default=str))
    text = table(report) + f"\n{sum(r['ok'] for r in report.values())}/{len(report)} scenarios ok, {wall} s of " \
                           f"the {gpu_plan.BUDGET_SECONDS} s budget\n"
    (out / "table.txt").write_text(text)
    return text


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="scenario name (repeatable)")
    ap.add_argument("--out", type=Path, default=Path("build/gpu-check"))
    ap.add_argument("--parallel", type=int, default=gpu_scenarios.PARALLEL, help="engines at once on the GPU")
    ap.add_argument("--plan", action="store_true", help="print the engine plan and its time estimate, run nothing")
    args = ap.parse_args(argv)
    # KV pools are opt-in (vllm/_fork/kv_pages.py); this check proves them, so its engines opt in (the A/B's
    # stock arm sets VLLM_FORK_DISABLE_KV_PACKING=1, which wins).
    os.environ.setdefault("VLLM_FORK_KV_POOLS", "on")
    known = [s.name for s in gpu_scenarios.SCENARIOS] + [KERNELS]
    unknown = [n for n in args.only if n not in known]
    if unknown:
        print(f"gpu-check: unknown scenario {unknown[0]}; known: {', '.join(known)}", file=sys.stderr)
        return Exit.BAD_INPUT
    chosen = [s for s in gpu_scenarios.SCENARIOS if not args.only or s.name in args.only]
    started, report, budget = time.time(), {}, []
    if not args.plan and (not args.only or KERNELS in args.only):
        report[KERNELS] = kernel_check()
        print("\n".join(report[KERNELS].get("lines", report[KERNELS]["problems"])), flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        work, shared = Path(scratch), {}
        needs = {s.name: jobs_for(s, work, args.out / "logs", shared) for s in chosen}
        jobs = gpu_plan.plan(list(dict.fromkeys(j for roles in needs.values() for j in roles.values())))
        print("\n".join(gpu_plan.lines(needs, jobs, args.parallel)), flush=True)
        if args.plan:
            return Exit.OK
        args.out.mkdir(parents=True, exist_ok=True)
        write(args.out, report, budget, started)
        if jobs:
            gpu_scenarios.write(work)

        def done(job):
            r = job.result
            budget.append({"engine": job.name, "wall": r.get("process_seconds"), "startup": r.get("startup_seconds"),
                           "generate": r.get("generate_seconds"), "estimate": job.estimate, "limit": job.timeout})
            print(f"engine {job.name}: {r.get('process_seconds')} s (startup {r.get('startup_seconds')} s, "
                  f"generate {r.get('generate_seconds')} s){'' if r.get('ok') else ' FAILED'}", flush=True)
            for s in chosen:
                roles = needs[s.name]
                if s.name not in report and all(j.result is not None for j in roles.values()):
                    runs = {role: j.result for role, j in roles.items()}
                    try:
                        report[s.name] = row(s, runs, verdict(s, runs))
                    except Exception:  # noqa: BLE001 - a verdict that crashes fails its scenario, with the trace
                        report[s.name] = {"ok": False, "problems": ["verdict crashed"], "runs": {},
                                          "traceback": traceback.format_exc()}
                    print(f"scenario {s.name}: {'ok' if report[s.name]['ok'] else 'FAILED'}", flush=True)
                    write(args.out, report, budget, started)

        gpu_pool.run(jobs, args.parallel, args.out / "cache", done,
                     solo_first=bool(jobs) and gpu_plan.kind(jobs[0]) == "warmup",
                     deadline=started + gpu_plan.BUDGET_SECONDS)
    text = write(args.out, report, budget, started)
    print(text)
    return Exit.OK if all(r["ok"] for r in report.values()) else Exit.FINDINGS


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as exc:  # noqa: BLE001 - our own bug: one line, exit 3
        print(f"gpu-check: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(Exit.INTERNAL)
