"""Time to verdict of `vllm spec-check` on GLM-5.3-Flash + DFlash2 (real dimensions, TP8), next to `vllm --version`
and `python -c "import vllm.config"`.

    .venv-test/bin/python benchmarks/spec_check/vs_version.py [--repeat 5] [--cold] [--baseline DIR]

`vllm --version` is the floor of any `vllm` subcommand (the CLI's own imports), and importing `vllm.config` the
floor of anything that builds vLLM's configs, as spec-check does. The commands run alternately
in the same loop, so a loaded machine slows both alike. Printed per command: the median wall seconds and the
median CPU seconds (user + sys of the process and its children, which a loaded machine inflates far less), their
ratios, and the load average before and after. With --cold every spec-check run gets an empty VLLM_CACHE_ROOT, as
on a user's first run, so vLLM's registry inspection of the two architectures is not answered from its cache.
With --baseline DIR a second spec-check, another build's `vllm` package unpacked in DIR (put first on PYTHONPATH),
runs in the same loop: before and after on the same machine state. Without --cold each spec-check runs once
untimed first, so both answer from a warm cache as a user's second run does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "scripts"


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child and its children, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="an empty VLLM_CACHE_ROOT for every spec-check run")
    parser.add_argument("--baseline", help="a folder holding another build's vllm package, timed alongside")
    parser.add_argument("--candidate", help="time this folder's vllm package (first on PYTHONPATH) instead of the "
                        "installed one, so that both builds are imported the same way")
    args = parser.parse_args()
    vllm = str(Path(sys.executable).parent / "vllm")
    load_before = load()
    runs: dict[str, list[tuple[float, float, int]]] = {"spec-check": [], "--version": [], "import vllm.config": []}
    if args.baseline:
        runs["spec-check baseline"] = []
    with tempfile.TemporaryDirectory(prefix="spec-check-time-") as tmp:
        listing = subprocess.run([sys.executable, str(SCRIPTS / "spec_check_scenarios.py"), tmp], check=True,
                                 capture_output=True, text=True).stdout
        argv = json.loads(next(line for line in listing.splitlines() if line.startswith("glm5_dflash2_alias ")
                               ).split(" ", 1)[1])
        check, version = [vllm, "spec-check", *argv], [vllm, "--version"]
        baseline = dict(os.environ, PYTHONPATH=args.baseline) if args.baseline else None
        candidate = dict(os.environ, PYTHONPATH=args.candidate) if args.candidate else dict(os.environ)
        if not args.cold:  # warm the caches both builds read (vLLM's registry, spec-check's backend answers)
            for env in (candidate, baseline):
                if env is not None:
                    timed(check, env)
        for index in range(args.repeat):
            env = dict(candidate)
            if args.cold:
                env["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix=f"cache{index}-", dir=tmp)
            runs["spec-check"].append(timed(check, env))
            if baseline is not None:
                runs["spec-check baseline"].append(timed(check, {**baseline, **({"VLLM_CACHE_ROOT": env[
                    "VLLM_CACHE_ROOT"] + "-b"} if args.cold else {})}))
            runs["--version"].append(timed(version, dict(os.environ)))
            runs["import vllm.config"].append(timed([sys.executable, "-c", "import vllm.config"], dict(candidate)))
    wall = {name: statistics.median(w for w, _, _ in found) for name, found in runs.items()}
    cpu = {name: statistics.median(c for _, c, _ in found) for name, found in runs.items()}
    print(f"GLM-5.3-Flash + DFlash2 (method dflash2), TP8, real dimensions; {os.cpu_count()} cores, "
          f"{args.repeat} runs each, alternating; vLLM cache {'empty (--cold)' if args.cold else 'as found'}; "
          f"load average (1/5/15 min) {load_before} before, {load()} after")
    for name, found in runs.items():
        print(f"  {name:24} wall {wall[name]:6.2f} s  CPU {cpu[name]:6.2f} s  (wall runs: "
              f"{', '.join(f'{w:.1f}' for w, _, _ in found)}; exit {sorted({code for _, _, code in found})})")
    for name in [n for n in runs if n.startswith("spec-check")]:
        for floor in ("--version", "import vllm.config"):
            print(f"  {name} / {floor}: wall {wall[name] / wall[floor]:.2f}x, CPU {cpu[name] / cpu[floor]:.2f}x")
    if args.baseline:
        print(f"  spec-check / baseline: wall {wall['spec-check'] / wall['spec-check baseline']:.2f}x, "
              f"CPU {cpu['spec-check'] / cpu['spec-check baseline']:.2f}x")


if __name__ == "__main__":
    main()
