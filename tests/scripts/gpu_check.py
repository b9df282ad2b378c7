"""`make gpu-check`: the fork's GPU acceptance run on one H100/H200 (TP1), every scenario of gpu_scenarios.py.

Usage: python gpu_check.py [--only NAME ...] [--out DIR]
Per scenario: the target without speculation (greedy, top-2 logprobs; shared by scenarios with the same target,
KV dtype and prompts), then with the speculative config, each engine in its own process (gpu_engine.py) that exits
before the next starts. Packed scenarios run a third engine with VLLM_FORK_DISABLE_KV_PACKING=1 (A/B on the same
build). Writes DIR/report.json and DIR/table.txt, prints the table. Exit 0 all passed, 1 a scenario failed,
2 bad input, 3 internal error. Never run here: this project has no GPU (see README, "GPU acceptance").
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu_scenarios  # noqa: E402
from gpu_verdicts import greedy_verdict, packing_verdict  # noqa: E402

from vllm._fork.kv_pages import DISABLE_ENV  # noqa: E402
from vllm._fork.vocabulary import Exit  # noqa: E402

ENGINE_TIMEOUT = 600
BACKEND_LINE = re.compile(r"Using (\S+) attention backend")


def engine(request: dict, log: Path, env: dict | None = None) -> dict:
    """One engine process; its result, or {"error": ...} with the log's tail."""
    with tempfile.TemporaryDirectory() as scratch:
        req, out = Path(scratch) / "request.json", Path(scratch) / "out.json"
        req.write_text(json.dumps(request))
        with log.open("w") as sink:
            try:
                code = subprocess.run([sys.executable, str(HERE / "gpu_engine.py"), str(req), str(out)], stdout=sink,
                                      stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                      timeout=ENGINE_TIMEOUT).returncode
            except subprocess.TimeoutExpired:  # the child is killed; a hung engine is this scenario's failure
                code = f"timeout after {ENGINE_TIMEOUT} s"
        text = log.read_text(errors="replace")
        result = json.loads(out.read_text()) if code == 0 and out.exists() else {
            "error": f"engine exited {code}: " + " | ".join(text.strip().splitlines()[-3:])}
    result["backends"] = sorted(set(BACKEND_LINE.findall(text)))
    return result


def base_key(scenario) -> tuple:
    """Scenarios whose target runs alike without speculation share one base run."""
    target = re.sub(r"_mtp\d+$", "", scenario.target)
    return target, scenario.engine.get("kv_cache_dtype", "auto"), "long" if scenario.packed else "short"


def check(scenario, work: Path, logs: Path, bases: dict) -> dict:
    spec_engine = gpu_scenarios.engine_kwargs(scenario, work)
    key = base_key(scenario)
    if key not in bases:
        plain = dict(spec_engine, speculative_config=None, model=str(work / key[0]))
        bases[key] = engine({"engine": plain, "prompts": key[2], "logprobs": True}, logs / f"base-{'-'.join(key)}.log")
    base = bases[key]
    spec = engine({"engine": spec_engine, "prompts": key[2]}, logs / f"{scenario.name}.log")
    row = {"base": base, "spec": spec, "problems": []}
    for run in (base, spec):
        if "error" in run:
            row["problems"].append(run["error"])
    if not row["problems"]:
        row["greedy"] = greedy_verdict(base["tokens"], base["top2"], spec["tokens"])
        row["problems"] += row["greedy"]["problems"]
        if scenario.target.startswith("glm5") and "FLASHINFER_MLA_SPARSE_SM90" not in spec["backends"]:
            row["problems"].append(f"sparse MLA backend {spec['backends']}, not FLASHINFER_MLA_SPARSE_SM90")
    if scenario.packed and not row["problems"]:
        off = engine({"engine": spec_engine, "prompts": key[2]}, logs / f"{scenario.name}-packing-off.log",
                     {DISABLE_ENV: "1"})
        row["packing_off"] = off
        row["problems"] += [off["error"]] if "error" in off else (
            packing_verdict(spec, off) + greedy_verdict(base["tokens"], base["top2"], off["tokens"])["problems"])
    row["ok"] = not row["problems"]
    return row


def table(report: dict) -> str:
    head = ("scenario", "verdict", "tokens compared", "accept len", "base tok/s", "spec tok/s", "draft block",
            "packing off: accept len")
    rows = [head]
    for name, row in report.items():
        spec, greedy = row.get("spec", {}), row.get("greedy", {})
        draft = [g["block_size"] for g in spec.get("kv_groups", []) if g["draft"]]
        rows.append((name, "ok" if row["ok"] else "FAILED: " + row["problems"][0][:80],
                     f"{greedy.get('compared', '-')}/{greedy.get('total', '-')}",
                     str(spec.get("mean_acceptance_length", "-")),
                     str(row.get("base", {}).get("tokens_per_second", "-")),
                     str(spec.get("tokens_per_second", "-")), str(draft or "-"),
                     str(row.get("packing_off", {}).get("mean_acceptance_length", "-"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in rows)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="scenario name (repeatable)")
    ap.add_argument("--out", type=Path, default=Path("build/gpu-check"))
    args = ap.parse_args(argv)
    unknown = [n for n in args.only if n not in {s.name for s in gpu_scenarios.SCENARIOS}]
    if unknown:
        print(f"gpu-check: unknown scenario {unknown[0]}; known: "
              f"{', '.join(s.name for s in gpu_scenarios.SCENARIOS)}", file=sys.stderr)
        return Exit.BAD_INPUT
    chosen = [s for s in gpu_scenarios.SCENARIOS if not args.only or s.name in args.only]
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started, report, bases = time.time(), {}, {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        work = gpu_scenarios.write(Path(scratch))
        for scenario in chosen:
            report[scenario.name] = check(scenario, work, logs, bases)
            print(f"scenario {scenario.name}: {'ok' if report[scenario.name]['ok'] else 'FAILED'}", flush=True)
    wall = round(time.time() - started, 1)
    (args.out / "report.json").write_text(json.dumps({"wall_seconds": wall, "scenarios": report}, indent=1))
    text = table(report) + f"\n{sum(r['ok'] for r in report.values())}/{len(report)} scenarios ok in {wall} s\n"
    (args.out / "table.txt").write_text(text)
    print(text)
    return Exit.OK if all(r["ok"] for r in report.values()) else Exit.FINDINGS


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as exc:  # noqa: BLE001 - our own bug: one line, exit 3
        print(f"gpu-check: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(Exit.INTERNAL)
