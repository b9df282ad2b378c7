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


if __name__ == "__main__":
    cases = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run_all(cases), indent=1))
