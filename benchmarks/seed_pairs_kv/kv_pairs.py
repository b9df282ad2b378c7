"""KV capacity of the fork's three seed pairs at TP8, stock and fork side by side, as vLLM 0.34.0 plans them on a CPU.

    python benchmarks/seed_pairs_kv/kv_pairs.py [--gpu H100 H200] [--kv auto fp8] [--planner stock fork] [--keep DIR]

GLM-5.3-Flash + DFlash2, Qwen3-Coder-Next + DFlash, text-only Kimi-K3 + DSpark (also with --use-replayssm), each
next to its target alone. One process per GPU on the stand-in SM90 platform (README.md). Every row plans at the
same stated KV budget per rank, so rows compare: concurrency scales with the budget, bytes per request do not.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "glm5_kv"))

import model_configs  # noqa: E402
import sm90_stub  # noqa: E402  (only its build helper runs here; vllm is never imported here)

CORPUS = ROOT / "tests" / "corpus" / "configs"
MIB, GIB = 1 << 20, 1 << 30
# KV budget per rank: 0.9 of the GPU less a stated 40 GiB of weights per rank (GLM-5.3-Flash's FP8 checkpoint is
# 38.3 GiB per rank of TP8, its DFlash2 draft 0.9 GiB); the same for every pair so that rows compare.
WEIGHTS_PER_RANK_GIB = 40
MAX_MODEL_LEN = 131072  # every pair plans 128k requests, and reports 8k ones too


PROJECTED = " (RecoverSSM projected)"
REPLAY = " --use-replayssm"
# RecoverSSM's verify records take max_num_seqs x (KDA layers per rank) x 64 KiB on GLM-5.3-Flash at TP8 outside the
# KV cache: 2.1 GiB per rank at vllm serve's H100/H200 default of 1024 sequences, a quarter of it at 256, which is
# still more than the 8k requests that fit.
RECOMMENDED_SEQS = 256
SEQS = f" --max-num-seqs {RECOMMENDED_SEQS}"


def pairs(models: Path) -> dict[str, tuple[str, dict | None, dict]]:
    """name -> (target folder, speculative config or None, extra engine flags). A PROJECTED row plans as if vLLM let
    the target take --use-replayssm (Qwen3-Next's GDN does not); on Kimi-K3, which takes it, the projection must equal
    the real flag's row."""
    glm = str(models / model_configs.TARGET_DIR)
    dflash2 = {"method": "dflash", "model": str(models / model_configs.DRAFT_DIR), "num_speculative_tokens": 7}
    qwen = str(CORPUS / "Qwen3-Coder-Next")
    dflash = {"method": "dflash", "model": str(CORPUS / "Qwen3-Coder-Next-DFlash"), "num_speculative_tokens": 15}
    kimi = str(CORPUS / "Kimi-K3")
    dspark = {"method": "dspark", "model": str(CORPUS / "Kimi-K3-DSpark"), "num_speculative_tokens": 7}
    replay, recommended = {"use_replayssm": True}, {"use_replayssm": True, "max_num_seqs": RECOMMENDED_SEQS}
    return {"GLM-5.3-Flash": (glm, None, {}), "GLM-5.3-Flash + DFlash2": (glm, dflash2, {}),
            "GLM-5.3-Flash + DFlash2" + REPLAY: (glm, dflash2, replay),
            "GLM-5.3-Flash + DFlash2" + REPLAY + SEQS: (glm, dflash2, recommended),
            "Qwen3-Coder-Next": (qwen, None, {}), "Qwen3-Coder-Next + DFlash": (qwen, dflash, {}),
            "Kimi-K3": (kimi, None, {}), "Kimi-K3 + DSpark": (kimi, dspark, {}),
            "Kimi-K3 + DSpark" + REPLAY: (kimi, dspark, replay),
            "Kimi-K3 + DSpark" + REPLAY + SEQS: (kimi, dspark, recommended),
            "Qwen3-Coder-Next + DFlash" + PROJECTED: (qwen, dflash, {}),
            "Kimi-K3 + DSpark" + PROJECTED: (kimi, dspark, {})}


def scenarios(models: Path, gpu: str, kvs: list[str], planners: list[str]) -> dict[str, dict]:
    budget = 0.9 * sm90_stub.GPUS[gpu][1] / (1 << 30) - WEIGHTS_PER_RANK_GIB
    return {f"{pair}|{kv}|{planner}": {"model": model, "spec": spec, "kv": kv, "planner": planner,
                                       "budget_gib": budget, "project_recoverssm": pair.endswith(PROJECTED),
                                       "flags": {"max_model_len": MAX_MODEL_LEN, **flags}}
            for pair, (model, spec, flags) in pairs(models).items() for kv in kvs for planner in planners}


def run_gpu(work: Path, gpu: str, kvs: list[str], planners: list[str]) -> dict[str, dict]:
    source, out, log = work / f"{gpu}.scenarios.json", work / f"{gpu}.out.json", work / f"{gpu}.log"
    source.write_text(json.dumps(scenarios(work / "models", gpu, kvs, planners)))
    with open(log, "w") as handle:
        done = subprocess.run([sys.executable, str(HERE / "plan_pairs.py"), str(work / "libcuda.so.1"), gpu,
                               str(source), str(out)], stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"plan_pairs.py for {gpu} exited {done.returncode}; see {log}")
    return json.loads(out.read_text())


def stock_verdict(work: Path, scenario: dict) -> str:
    """Stock vLLM 0.34.0's own answer to one scenario's command line: the pinned wheel's Python files (from the
    forktool download cache) first on the path."""
    sys.path.insert(0, str(ROOT))
    from forktool.fetch import fetch
    from forktool.project import Project

    pin = Project(ROOT).pin
    wheel, _ = fetch(pin.name, pin.version, "wheel", pin.hashes)
    stock = work / "stock-python"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(stock, [n for n in archive.namelist() if n.endswith(".py")])
    # The compiled extensions (400 MB in the wheel) are linked from this interpreter's vllm, whose are upstream's own:
    # the fork wheel carries them unchanged.
    installed = Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
    for compiled in installed.rglob("*.so"):
        link = stock / "vllm" / compiled.relative_to(installed)
        if link.parent.is_dir() and not link.exists():
            link.symlink_to(compiled)
    (work / "stock.scenario.json").write_text(json.dumps(scenario))
    done = subprocess.run([sys.executable, str(HERE / "stock_verdict.py"), str(work / "libcuda.so.1"), "H100",
                           str(work / "stock.scenario.json")], capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=str(stock)))
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"stock_verdict.py exited {done.returncode}: {done.stderr[-2000:]}")
    return lines[-1]


def _at(result: dict, length: int) -> dict:
    return next(r for r in result["requests"] if r["length"] == length)


def print_table(gpu: str, results: dict[str, dict]) -> None:
    print(f"\n{gpu}, TP8, KV budget {results and next(iter(results.values())).get('budget', '')}")
    head = (f"{'pair':<50}{'KV':<5}{'planner':<8}{'block':>6}{'groups':>7}{'MiB/req 8k':>11}{'conc 8k':>9}"
            f"{'MiB/req 128k':>13}{'conc 128k':>10}{'draft':>7}{'states':>8}{'padding':>8}{'records':>9}")
    print(head)
    for name, result in results.items():
        pair, kv, planner = name.split("|")
        if not result["ok"]:
            print(f"{pair:<50}{kv:<5}{planner:<8}  refused: {result['error'][:120]}")
            continue
        short, full = _at(result, 8192), _at(result, MAX_MODEL_LEN)
        print(f"{pair:<50}{kv:<5}{planner:<8}{result['block_size']:>6}{result['groups']:>7}"
              f"{short['bytes_per_request'] / MIB:>11.1f}{short['concurrency']:>9.1f}"
              f"{full['bytes_per_request'] / MIB:>13.1f}{full['concurrency']:>10.2f}"
              f"{short['draft_share']:>7.0%}{short['speculative_state_share']:>8.0%}{short['padding_share']:>8.0%}"
              f"{result['verify_records'] / GIB:>9.2f}")


def _draft_mark(group: dict) -> str:
    """'*' for a draft group, '*N%' for a group the draft's layers share with the target's."""
    if not group["draft"]:
        return ""
    part = group["draft_used_bytes_per_block"] / group["used_bytes_per_block"]
    return "*" if part == 1 else f"*{part:.0%}"


def print_groups(gpu: str, results: dict[str, dict]) -> None:
    """Per group, MiB of one 8k request (bf16 KV, the fork's planner)."""
    print(f"\n{gpu} bf16 fork: MiB of one 8k request per KV group (kind x layers, * = draft [its part of "
          "a shared group], + = states per draft position)")
    for name, result in results.items():
        pair, kv, planner = name.split("|")
        if kv != "auto" or planner != "fork" or not result["ok"]:
            continue
        groups = _at(result, 8192)["groups"]
        cells = [f"{g['kind'].replace('Spec', '')}x{g['layers']}{_draft_mark(g)}"
                 f"{'+' if g['speculative_blocks'] else ''} {g['bytes'] / MIB:.1f}" for g in groups]
        print(f"  {pair}: " + ", ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", nargs="+", default=["H100", "H200"], choices=sorted(sm90_stub.GPUS))
    parser.add_argument("--kv", nargs="+", default=["auto", "fp8"], choices=["auto", "fp8"])
    parser.add_argument("--planner", nargs="+", default=["stock", "fork"], choices=["stock", "fork"])
    parser.add_argument("--keep", type=Path, help="keep the configs, logs and JSON results in DIR")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        model_configs.write(work / "models")
        sm90_stub.build_libcuda_stub(work)
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = dict(zip(args.gpu, pool.map(lambda gpu: run_gpu(work, gpu, args.kv, args.planner), args.gpu)))
        glm_replay = scenarios(work / "models", "H100", ["auto"], ["fork"])[f"GLM-5.3-Flash + DFlash2{REPLAY}|auto|fork"]
        verdict = stock_verdict(work, glm_replay)
    for gpu, results in runs.items():
        budget = 0.9 * sm90_stub.GPUS[gpu][1] / (1 << 30) - WEIGHTS_PER_RANK_GIB
        for result in results.values():
            result["budget"] = f"{budget:.1f} GiB per rank"
        print_table(gpu, results)
        print_groups(gpu, results)
    print(f"\nStock vLLM 0.34.0 (the pinned wheel's own files) on GLM-5.3-Flash + DFlash2{REPLAY}: {verdict}")
    print(f"\n{time.perf_counter() - started:.0f} s")
    sys.exit(int(any(not r["ok"] for results in runs.values() for r in results.values())))


if __name__ == "__main__":
    main()
