"""Time to verdict of `vllm spec-check` on GLM-5.3-Flash + DFlash2 (real dimensions, TP8), next to `vllm --version`.

    .venv-test/bin/python benchmarks/spec_check/vs_version.py [--repeat 5]

`vllm --version` is the floor of any `vllm` subcommand (the CLI's own imports). Both commands run alternately
in the same loop, so a loaded machine slows both alike; the medians and their ratio are printed.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "scripts"


def timed(command: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    vllm = str(Path(sys.executable).parent / "vllm")
    with tempfile.TemporaryDirectory(prefix="spec-check-time-") as tmp:
        listing = subprocess.run([sys.executable, str(SCRIPTS / "spec_check_scenarios.py"), tmp], check=True,
                                 capture_output=True, text=True).stdout
        argv = json.loads(next(line for line in listing.splitlines() if line.startswith("glm5_dflash2_alias ")
                               ).split(" ", 1)[1])
        check, version = [vllm, "spec-check", *argv], [vllm, "--version"]
        runs: dict[str, list[tuple[float, int]]] = {"spec-check": [], "--version": []}
        for _ in range(args.repeat):
            runs["spec-check"].append(timed(check))
            runs["--version"].append(timed(version))
    medians = {name: statistics.median(s for s, _ in found) for name, found in runs.items()}
    codes = {name: sorted({code for _, code in found}) for name, found in runs.items()}
    print(f"GLM-5.3-Flash + DFlash2 (method dflash2), TP8, real dimensions; {os.cpu_count()} cores, "
          f"{args.repeat} runs each, alternating")
    for name in runs:
        print(f"  vllm {name:11} median {medians[name]:6.2f} s  (runs: "
              f"{', '.join(f'{s:.1f}' for s, _ in runs[name])}; exit {codes[name]})")
    print(f"  spec-check / --version: {medians['spec-check'] / medians['--version']:.2f}x")


if __name__ == "__main__":
    main()
