"""`make gpu-dry-run`: every gpu-check scenario taken up to the first CUDA kernel, on a CPU, in one process.

Usage: python gpu_dry_run.py [--only NAME ...] [--blockers] [--rerun NAME ...] [--json OUT]
Per scenario, with vLLM's own code on a stand-in SM90 platform (benchmarks/glm5_kv/sm90_stub.py answers device
queries only): checkpoint folders written (gpu_scenarios.py), EngineArgs -> VllmConfig, the model-parallel groups
the scenario's engine builds (torn down and rebuilt per scenario: the order does not matter), the renderer
(tokenizer, multimodal processor) as LLMEngine builds it, target and drafter built on the meta device through the
runner's own speculator (init_speculator + load_model, which marks the draft layers), the constructed checkpoints'
tensors through the models' own load_weights, the layers' own forward-time assertions evaluated on the built
modules, the attention backends the layers picked, the KV plan from EngineCore._initialize_kv_caches with and
without VLLM_FORK_DISABLE_KV_PACKING (the A/B of gpu-check), the Scheduler and the KV views for both plans, and
for the pools scenario gpu-check's rules that need no GPU (gpu_verdicts.pools_plan_problems) on both Schedulers
(on a vLLM release the pools are not ported to, that both Schedulers are stock's: gpu_check.pools_gated_problems).
Prints `scenario NAME: dry-run ok` or `scenario NAME: dry-run FAILED: <reason>`. Exit 0 when every scenario is
ok, 1 when one failed (--blockers adds the old GPU script's two startup blockers, which must fail), 2 bad input.
--rerun runs a scenario once more at the end (the JSON's "reruns", with the scenario run just before it).
Not proven here: any kernel, CUDA graph capture, memory profiling, the numbers the GPU computes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_dry_build  # noqa: E402  (installs nothing at import; install_platform must precede any vllm import)
import gpu_scenarios  # noqa: E402

from vllm._fork.vocabulary import Exit  # noqa: E402  (pure Python: imports no vllm module)

# The production sparse-MLA kernel on SM90 (head size 512/576 only); tiny MLA heads would pick another.
GLM_TARGET_BACKEND = "FLASHINFER_MLA_SPARSE_SM90"


class Finding(Exception):
    """A scenario that would fail on the GPU box, with the reason."""


def check_plan(scenario, fork: dict, stock: dict) -> None:
    from gpu_dry_checks import draft_blocks

    ours, theirs = draft_blocks(fork), draft_blocks(stock)
    if scenario.packed and not any(a > b for a, b in zip(ours, theirs)):
        raise Finding(f"draft KV group not packed (draft blocks {ours}, with packing off {theirs})")
    if not scenario.packed and ours != theirs:
        raise Finding(f"draft KV group packed where it must not be ({theirs} -> {ours})")


def check_pools(scenario, on: dict, off: dict) -> None:
    """gpu-check's pools rules that need no GPU, on the Schedulers built for both arms: the KV configs, a pool per
    carved group, and the same prefix hits for gpu-check's prompts."""
    from gpu_verdicts import auto_plan_problems, pools_plan_problems

    if scenario.auto_pools:  # planned as `on`: what the default carves once its self-test passes on the GPU
        if problems := auto_plan_problems(on["kv_config"], off["kv_config"]):
            raise Finding(problems[0])
    if not scenario.pools:
        return
    problems = pools_plan_problems(on["kv_config"], off["kv_config"])
    if not any(on["prefix_hits"]) or on["prefix_hits"] != off["prefix_hits"]:
        problems.append(f"prefix hits per prompt {on['prefix_hits']} with pools, {off['prefix_hits']} without")
    for arm, built in (("pools on", on), ("pools off", off)):
        carved = [g["slots"] > 1 for g in built["kv_config"]["groups"]]
        if [pool == "SlabBlockPool" for pool in built["pools"]] != carved:
            problems.append(f"{arm}: the scheduler's block pools {built['pools']} are not the carved groups")
    if problems:
        raise Finding(problems[0])


def check_pools_gated(on: dict, off: dict) -> None:
    """The pools scenario on a vLLM release the pools are not ported to (vllm/_fork/kv_pages.py PROVEN_RELEASES):
    both arms build stock's Scheduler (gpu-check's gated A/B rules), with the same block pools and prefix hits."""
    from gpu_check import pools_gated_problems

    problems = pools_gated_problems(on["kv_config"], off["kv_config"])
    if on["pools"] != off["pools"] or on["prefix_hits"] != off["prefix_hits"] or not any(on["prefix_hits"]):
        problems.append(f"block pools {on['pools']} / prefix hits {on['prefix_hits']} with pools opted in, "
                        f"{off['pools']} / {off['prefix_hits']} without")
    if problems:
        raise Finding(problems[0])


def dry_run(scenario, work: Path, platform, state: dict) -> dict:
    """One scenario through everything before the first kernel; raises on the first problem."""
    from gpu_dry_checks import (VIEW_KV_BYTES, VIEW_MAX_LEN, attention_backends, collect_specs, forward_assertions,
                                kv_views, plan, prefix_hits, scheduler)
    from vllm._fork.kv_pages import pools_proven
    from vllm.engine.arg_utils import EngineArgs

    vc = EngineArgs(**gpu_scenarios.engine_kwargs(scenario, work)).create_engine_config()
    if not state.get("world"):
        gpu_dry_build.init_world()
        state["world"] = True
    out = {"groups": gpu_dry_build.model_parallel(vc), "renderer": gpu_dry_build.renderer(vc)}
    target, speculator = gpu_dry_build.build(vc)
    out["speculator"] = type(speculator).__name__
    if scenario.constructed:  # real checkpoints: every tensor must find its parameter, shape for shape
        out["loaded"] = gpu_dry_build.load_weights(vc, target, speculator.model)
    checked, failures = forward_assertions(target, speculator.model)
    out["assertions_checked"] = checked
    if failures:
        raise Finding(failures[0])
    backends = attention_backends(vc)
    out["backends"] = {side: dict(names) for side, names in backends.items()}
    if scenario.target.startswith("glm5") and GLM_TARGET_BACKEND not in backends["target"]:
        raise Finding(f"target MLA layers picked {sorted(backends['target'])}, not {GLM_TARGET_BACKEND}")
    if not backends["draft"] and scenario.draft_kinds:
        raise Finding("no draft attention layer was marked (is_draft_layer)")
    specs = collect_specs(platform, vc)
    kept, stock = {}, {}
    out["plan"] = plan(vc, specs, packing=True, keep=kept)
    out["plan_packing_off"] = plan(vc, specs, packing=False, keep=stock)
    check_plan(scenario, out["plan"], out["plan_packing_off"])
    out["scheduler"] = scheduler(kept["vc"], kept["config"])
    out["scheduler_packing_off"] = scheduler(stock["vc"], stock["config"])
    if scenario.pools:  # gpu-check's shared-prefix prompts through each arm's KV cache manager
        import gpu_check

        batches = list(gpu_check.request_prompts("prefix").values())
        for key, arm in (("scheduler", kept), ("scheduler_packing_off", stock)):
            out[key]["prefix_hits"] = prefix_hits(arm["vc"], arm["config"], batches)
    if scenario.pools and not pools_proven():  # not ported to this vLLM: opting in must keep stock's plan
        check_pools_gated(out["scheduler"], out["scheduler_packing_off"])
    else:
        check_pools(scenario, out["scheduler"], out["scheduler_packing_off"])
    for packing in (True, False):  # the views where packed blocks become real, and the stock ones
        small = {}
        plan(vc, specs, packing=packing, available=VIEW_KV_BYTES, max_len=VIEW_MAX_LEN, keep=small)
        out["kv_views" if packing else "kv_views_packing_off"] = kv_views(small["vc"], small["config"], specs)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="scenario name (repeatable)")
    ap.add_argument("--blockers", action="store_true", help="also run the two known startup blockers")
    ap.add_argument("--json", type=Path, help="write every scenario's details here")
    ap.add_argument("--rerun", action="append", default=[],
                    help="run this scenario again after the others (its result must not depend on what ran before)")
    args = ap.parse_args(argv)
    # KV pools are opt-in (vllm/_fork/kv_pages.py); the dry run plans them as gpu-check's engines do.
    os.environ.setdefault("VLLM_FORK_KV_POOLS", "on")
    unknown = [name for name in args.only + args.rerun if name not in gpu_scenarios.BY_NAME]
    if unknown:
        print(f"gpu-dry-run: unknown scenario {unknown[0]}; known: {', '.join(gpu_scenarios.BY_NAME)}",
              file=sys.stderr)
        return Exit.BAD_INPUT
    chosen = [gpu_scenarios.BY_NAME[n] for n in args.only] or gpu_scenarios.SCENARIOS + (
        gpu_scenarios.BLOCKERS if args.blockers else [])
    started = time.time()
    report, reruns, state = {}, [], {}
    with tempfile.TemporaryDirectory(prefix="gpu-dry-run-") as scratch:
        work = Path(scratch)
        platform = gpu_dry_build.install_platform(work)
        gpu_scenarios.write(work)
        for index, scenario in enumerate(chosen + [gpu_scenarios.BY_NAME[n] for n in args.rerun]):
            entry = _one(scenario, work, platform, state)
            if index < len(chosen):
                report[scenario.name] = entry
            else:
                reruns.append({"name": scenario.name, "after": chosen[-1].name if not reruns else reruns[-1]["name"],
                               "entry": entry})
    wall = round(time.time() - started, 1)
    done = list(report.values()) + [r["entry"] for r in reruns]
    print(f"gpu-dry-run: {sum(e['ok'] for e in done)}/{len(done)} ok in {wall} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"wall_seconds": wall, "scenarios": report, "reruns": reruns}, indent=1,
                                        default=str))
    return Exit.OK if all(e["ok"] for e in done) else Exit.FINDINGS


def _one(scenario, work: Path, platform, state: dict) -> dict:
    """One scenario's entry (its failure is its finding) and its line."""
    began = time.time()
    try:
        entry, line = {"ok": True, **dry_run(scenario, work, platform, state)}, "dry-run ok"
    except Exception as exc:  # noqa: BLE001 - every failure of a scenario is its finding, reported
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reason = f"{type(exc).__name__}: {reason}" if not isinstance(exc, Finding) else reason
        entry, line = {"ok": False, "reason": reason}, f"dry-run FAILED: {reason}"
    entry["seconds"] = round(time.time() - began, 1)
    print(f"scenario {scenario.name}: {line}", flush=True)
    return entry


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
