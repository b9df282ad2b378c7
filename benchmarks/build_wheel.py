"""Build the fork wheel N times and print, side by side: build time, sha256 stability, size vs upstream.

Run from the repo root in an environment with the engine (`.venv` or `.venv-test`):
    python benchmarks/build_wheel.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forktool.fetch import fetch, sha256_of  # noqa: E402
from forktool.project import Project  # noqa: E402
from forktool.wheelbuild import build_wheel  # noqa: E402


def _unpacked_size(path: Path) -> int:
    with zipfile.ZipFile(path) as wheel:
        return sum(info.file_size for info in wheel.infolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    project = Project()
    upstream, upstream_sha = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    times, digests = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            start = time.perf_counter()
            wheel = build_wheel(project, upstream, upstream_sha, Path(tmp) / str(run), project.label)
            times.append(time.perf_counter() - start)
            digests.append(sha256_of(wheel))
        fork_size, fork_unpacked = wheel.stat().st_size, _unpacked_size(wheel)
        up_size, up_unpacked = upstream.stat().st_size, _unpacked_size(upstream)
        print(f"{'':24}{'upstream':>16}{'fork':>16}{'delta':>12}")
        print(f"{'wheel bytes':24}{up_size:>16,}{fork_size:>16,}{fork_size - up_size:>+12,}")
        print(f"{'unpacked bytes':24}{up_unpacked:>16,}{fork_unpacked:>16,}{fork_unpacked - up_unpacked:>+12,}")
        print(f"build time, {args.runs} runs (s): " + ", ".join(f"{t:.1f}" for t in times)
              + f"; median {statistics.median(times):.1f}")
        print(f"sha256 identical across runs: {len(set(digests)) == 1} ({digests[0]})")


if __name__ == "__main__":
    main()
