"""KV-cache capacity of GLM-5.3-Flash at TP8, target-only vs + DFlash2, as vLLM 0.33.0 / 0.34.0 plans it.

Runs vLLM's own planner on a CPU (stand-in SM90 platform, see README.md), one subprocess per
GPU x KV dtype, and prints stock and fork plans side by side, next to the physical bound. From the repo root:
    python benchmarks/glm5_kv/kv_capacity.py [--gpu H100 H200] [--kv auto fp8] [--prefix-caching on off] [--jobs 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import model_configs  # noqa: E402
import sm90_stub  # noqa: E402  (only its build helper runs here; vllm is never imported here)
from bound import Bound  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
LENGTHS = (8192, 131072)
KV_NAME = {"auto": "bf16", "fp8": "fp8"}


def run_scenarios(work: Path, gpu: str, kv: str, runs: dict[str, tuple]) -> dict[str, dict]:
    """Several scenarios of one GPU and KV dtype (name -> draft, planner[, prefix_caching]) in one fresh
    interpreter (the stubs never leak between GPUs): vLLM is imported once for all of them."""
    stem = work / f"{gpu}_{kv}_{'+'.join(runs)}"  # its own files: kv_capacity runs several batches at once
    batch, outs = [], {}
    for name, (draft, planner, *rest) in runs.items():
        outs[name] = work / f"{gpu}_{kv}_{name}.json"
        batch.append({"draft": draft, "planner": planner, "prefix_caching": rest[0] if rest else True,
                      "out": str(outs[name])})
    Path(f"{stem}.batch.json").write_text(json.dumps(batch))
    log = Path(f"{stem}.log")
    cmd = [sys.executable, str(HERE / "scenario.py"), "--gpu", gpu, "--kv", kv, "--models", str(work / "models"),
           "--libcuda", str(work / "libcuda.so.1"), "--batch", f"{stem}.batch.json"]
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
    tail = "\n".join(log.read_text().splitlines()[-15:])
    failed = {"gpu": gpu, "kv": kv, "ok": False, "error": f"scenario.py exited {rc} without this result; log tail:\n"
              f"{tail}"}
    return {name: json.loads(out.read_text()) if out.exists() else
            {**failed, **{key: entry[key] for key in ("draft", "planner", "prefix_caching")}}
            for (name, out), entry in zip(outs.items(), batch)}


def scenario_label(res: dict) -> str:
    cache = "" if res.get("prefix_caching", True) else ", no prefix caching"
    release = res.get("vllm", "").split("+")[0]
    planner = "fork" if res["planner"] == "fork" else f"stock {release}".strip()
    if res["planner"] == "fork" and res.get("pools_ported") is False:
        planner += " (pools not ported: stock pools)"
    return ("target + DFlash2, " if res["draft"] else "target only, ") + planner + cache


def row(res: dict, text: dict, draft_cfg: dict) -> tuple[list[str], list[str]]:
    """One table row for a scenario, plus any bound-vs-spec consistency warnings."""
    head = [res["gpu"], KV_NAME[res["kv"]], scenario_label(res)]
    if not res.get("ok"):
        return head + ["FAILED: " + res["error"].splitlines()[0][:90]], []
    b = Bound(text, draft_cfg, res["kv"], res["draft"])
    conc = {int(k): v for k, v in res["concurrency"].items()}
    # vLLM's formula: pool / concurrency = shared blocks per request (a carved group's slots count 1/k each).
    planned = {n: res["num_blocks"] / conc[n] * res["block_stride"] for n in LENGTHS}
    ratio = b.request_bytes(8192) / planned[8192]
    cells = head + [
        str(res["block_size"]),
        f"{res['block_stride'] / res['block_size']:,.0f} ({b.target_per_token:,.0f})",
        f"{res['kv_cache_size_tokens']:,}",
        f"{conc[8192]:.1f}", f"{conc[131072]:.2f}",
        f"{planned[8192] / MIB:.1f}", f"{b.request_bytes(8192) / MIB:.1f}",
        f"{100 * ratio:.1f}%",
        f"{100 * b.request_bytes(131072) / planned[131072]:.1f}%",
    ]
    return cells, [f"{' '.join(head)}: {m}" for m in b.mismatch(res["spec_bytes"])]


COLUMNS = ["GPU", "KV", "scenario", "block", "KV B/token/rank planned (bound)",
           "max KV tokens", "conc @8k", "conc @128k", "MiB/8k req planned",
           "MiB/8k req bound", "bound/planned @8k", "bound/planned @128k"]


def print_table(results: list[dict], text: dict, draft_cfg: dict) -> None:
    """Markdown table: one row per scenario, grouped by GPU x KV dtype."""
    rows, warnings = [], []
    for res in results:
        cells, warn = row(res, text, draft_cfg)
        rows.append(cells)
        warnings += warn
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    for w in warnings:
        print("WARNING bound formula disagrees with vLLM's unpadded specs:", w)


def print_breakdown(results: list[dict]) -> None:
    """Where one 8k request's blocks go: per KV group, blocks x its block stride vs the bytes it needs."""
    print("\nOne 8,192-token request, per KV group (a block costs the group's block stride: the shared stride, or "
          "1/k of it in a carved pool):")
    print("| GPU | KV | scenario | group | layers | stride MiB (k) | page full | blocks | MiB taken | MiB needed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in (r for r in results if r.get("ok")):
        scenario = scenario_label(res)
        for index, group in enumerate(res["groups_8k"]):
            k = round(res["block_stride"] / group["stride"])
            print(f"| {res['gpu']} | {KV_NAME[res['kv']]} | {scenario} | {index}: {group_label(group)} | "
                  f"{group['layers']} | {group['stride'] / MIB:.2f} ({k}) | {page_fill(group):.1f}% | "
                  f"{group['blocks']} | {group['blocks'] * group['stride'] / MIB:.1f} | "
                  f"{group['needed_bytes'] / MIB:.1f} |")


def page_fill(group: dict) -> float:
    return 100 * group["page_bytes"] / group["stride"]


def print_gain(results: list[dict]) -> None:
    """Stock vs fork side by side, per GPU x KV dtype x drafter: the before/after of the fork's planning."""
    pairs: dict[tuple, dict] = {}
    for res in (r for r in results if r.get("ok")):
        pairs.setdefault((res["gpu"], res["kv"], res["prefix_caching"], res["draft"]), {})[res["planner"]] = res
    print("\nStock -> fork (pools per page size where ported, 0.33.x; draft packing only without prefix caching):")
    print("| GPU | KV | prefix caching | model | conc @8k | conc @128k | max KV tokens | least full page | "
          "hits aligned to | draft blocks per 8k request |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (gpu, kv, prefix_caching, draft), both in pairs.items():
        if set(both) != {"stock", "fork"}:
            continue
        stock, fork = both["stock"], both["fork"]
        cells = []
        for length in ("8192", "131072"):
            before, after = stock["concurrency"][length], fork["concurrency"][length]
            cells.append(f"{before:.1f} -> {after:.1f} ({100 * (after / before - 1):+.1f} %)")
        cells.append(f"{stock['kv_cache_size_tokens']:,} -> {fork['kv_cache_size_tokens']:,}")
        cells.append(f"{least_fill(stock):.1f}% -> {least_fill(fork):.1f}%")
        cells.append(f"{stock['hit_alignment']} -> {fork['hit_alignment']} tokens" if prefix_caching else "no hits")
        cells.append(f"{draft_blocks(stock)} -> {draft_blocks(fork)}" if draft else "-")
        print(f"| {gpu} | {KV_NAME[kv]} | {'on' if prefix_caching else 'off'} | "
              f"{'target + DFlash2' if draft else 'target only'} | " + " | ".join(cells) + " |")


def least_fill(res: dict) -> float:
    return min(page_fill(group) for group in res["groups_8k"])


def draft_blocks(res: dict) -> int:
    return sum(g["blocks"] for g in res["groups_8k"] if "(draft)" in g["kind"])


def group_label(group: dict) -> str:
    """The group's layer spec type and its page (all the group's layers together)."""
    return f"{group['kind']}, block {group['block_size']}, page {group['page_bytes'] / MIB:.2f} MiB"


HEADER = """\
Planner: vLLM's own KV planning. 'stock' rows switch the fork's planning changes off
(VLLM_FORK_DISABLE_KV_PACKING=1: no pools per page size, no draft packing), 'fork' rows keep them
(pools per page size only on the releases they were proven on, vllm/_fork/kv_pages.py PROVEN_RELEASES).
Available KV memory = 0.9 x GPU memory - 306 GiB/8 target weights - drafter weights;
activations, CUDA graphs and non-torch memory are NOT subtracted (real pools are smaller).
Bound = target KV for every token + KDA/tail states + drafter KV for its 2048-token
window only, no block rounding, no padding.  Goal: bound/planned >= 99% is the target.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", nargs="+", choices=sorted(sm90_stub.GPUS), default=["H100", "H200"])
    ap.add_argument("--kv", nargs="+", choices=["auto", "fp8"], default=["auto", "fp8"])
    ap.add_argument("--prefix-caching", nargs="+", choices=["on", "off"], default=["on", "off"],
                    help="plan as `vllm serve` with prefix caching on (its default) and/or off")
    ap.add_argument("--jobs", type=int, default=2, help="scenarios run in parallel")
    ap.add_argument("--keep", type=Path, help="keep configs, JSON results and logs here")
    args = ap.parse_args()

    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="glm5_kv_") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        text, draft_cfg = model_configs.write(work / "models")
        sm90_stub.build_libcuda_stub(work)
        # One interpreter per GPU x KV dtype plans its 8 scenarios (vLLM is imported once per batch).
        batches = [(gpu, kv, {f"{'draft' if d else 'nodraft'}_{p}_{c}": (d, p, c == "on")
                              for c in args.prefix_caching for d, p in itertools.product((False, True),
                                                                                        ("stock", "fork"))})
                   for gpu, kv in itertools.product(args.gpu, args.kv)]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = [res for batch in pool.map(lambda b: run_scenarios(work, *b), batches)
                       for res in batch.values()]
    elapsed = time.monotonic() - start

    version = next((r["vllm"] for r in results if r.get("vllm")), "?")
    print(f"GLM-5.3-Flash TP8 KV-cache plan per rank; vLLM {version}, stand-in SM90 platform")
    print(HEADER)
    print_table(results, text, draft_cfg)
    print_breakdown(results)
    print_gain(results)
    print()
    print(f"{len(results)} scenarios, --jobs {args.jobs}, wall time {elapsed / 60:.1f} min")
    failed = [r for r in results if not r.get("ok")]
    for r in failed:  # the table holds only the first line; the whole error helps more
        print(f"\n{r['gpu']} {r['kv']} draft={r['draft']}:\n{r.get('traceback', r['error'])}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
