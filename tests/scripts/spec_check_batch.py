"""Run many spec-check invocations in one process (imports paid once): `spec_check_batch.py CASES.json OUT.json`.

CASES.json is {name: argv}; every argv must name the same --gpu (the stand-in platform is installed once per
process). OUT.json gets {name: [exit code, stdout]}. Each case goes through spec-check's own `main()`, the
function `python -m vllm._fork.spec_check` runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from pathlib import Path


def run_all(cases: dict[str, list[str]]) -> dict[str, list]:
    from vllm._fork.spec_check.cli import main

    results = {}
    for name, argv in cases.items():
        out = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(out):
            code = main(list(argv))
        results[name] = [code, out.getvalue(), round(time.perf_counter() - started, 2)]
    return results


def in_processes(cases: dict[str, list[str]], tmp: Path, launcher=None) -> dict[str, tuple[int, str, str, float]]:
    """Run `cases` ({name: argv}) with --json, one process per --gpu, two at a time (one per core):
    {name: (exit code, stdout, that process's stderr, seconds)}. `launcher(gpu, CASES.json, OUT.json)` gives the
    command of one process (another harness, as spec_check_sm90.py); by default this script."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from vllm._fork.spec_check.platform import requested_gpu

    groups: dict = {}
    for name, argv in cases.items():
        groups.setdefault(requested_gpu(argv), {})[name] = list(argv) + ["--json"]
    launcher = launcher or (lambda gpu, source, target: [sys.executable, __file__, str(source), str(target)])

    def one(item):
        index, (gpu, group) = item
        source, target = Path(tmp) / f"cases{index}.json", Path(tmp) / f"results{index}.json"
        source.write_text(json.dumps(group))
        done = subprocess.run(launcher(gpu, source, target), capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"batch process failed: {done.stderr[-3000:]}")
        return {name: (code, out, done.stderr, seconds)
                for name, (code, out, seconds) in json.loads(target.read_text()).items()}

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {k: v for part in pool.map(one, enumerate(groups.items())) for k, v in part.items()}


if __name__ == "__main__":
    cases = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run_all(cases), indent=1))
