"""Build the fork wheel N times each way and print, side by side: build time, sha256, size vs upstream.

"recompress" is how builds wrote unchanged members before (inflate, deflate again); "raw copy" copies their
compressed bytes. Both must give the same sha256. Run from the repo root in an environment with the engine
(`.venv` or `.venv-test`):
    python benchmarks/build_wheel.py [--runs 3] [--pin requirements/cpu-base.txt] [--no-baseline]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forktool.build import build  # noqa: E402
from forktool.fetch import fetch, sha256_of  # noqa: E402
from forktool.options import BuildOptions  # noqa: E402
from forktool.project import Project  # noqa: E402


def _unpacked_size(path: Path) -> int:
    with zipfile.ZipFile(path) as wheel:
        return sum(info.file_size for info in wheel.infolist())


def _runs(project: Project, tmp: Path, runs: int, recompress: bool) -> tuple[list[float], list[float], list[str], Path]:
    """Wall and CPU seconds, digests and the last wheel of `runs` builds (with the flags the pin file names)."""
    walls, cpus, digests = [], [], []
    for run in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        options = BuildOptions.from_flags(project.pin.build_flags, project.pin_file, out=tmp / f"{recompress}-{run}",
                                          recompress=recompress)
        wheel = build(project, options).path
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        digests.append(sha256_of(wheel))
    return walls, cpus, digests, wheel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pin", default=None, help="another pin file, e.g. requirements/cpu-base.txt")
    parser.add_argument("--no-baseline", action="store_true", help="time the raw copy only")
    args = parser.parse_args()
    project = Project(pin_file=args.pin) if args.pin else Project()
    upstream, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    ways = [("raw copy", False)] + ([] if args.no_baseline else [("recompress", True)])
    print(f"{project.pin.name}=={project.pin.version}, {args.runs} runs each, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: _runs(project, Path(tmp), args.runs, flag) for name, flag in ways}
        wheel = results["raw copy"][3]
        fork_size, fork_unpacked = wheel.stat().st_size, _unpacked_size(wheel)
        up_size, up_unpacked = upstream.stat().st_size, _unpacked_size(upstream)
        print(f"{'':24}{'upstream':>16}{'fork':>16}{'delta':>12}")
        print(f"{'wheel bytes':24}{up_size:>16,}{fork_size:>16,}{fork_size - up_size:>+12,}")
        print(f"{'unpacked bytes':24}{up_unpacked:>16,}{fork_unpacked:>16,}{fork_unpacked - up_unpacked:>+12,}")
        print(f"{'':24}" + "".join(f"{name:>16}" for name, _ in ways) + ("       ratio" if len(ways) == 2 else ""))
        for label, column in (("median wall s", 0), ("median CPU s", 1)):
            medians = [statistics.median(results[name][column]) for name, _ in ways]
            ratio = f"{medians[1] / medians[0]:>11.1f}x" if len(medians) == 2 else ""
            print(f"{label:24}" + "".join(f"{m:>16.1f}" for m in medians) + ratio)
        digests = {d for name, _ in ways for d in results[name][2]}
        print(f"sha256 identical across runs and ways: {len(digests) == 1} ({', '.join(sorted(digests))})")


if __name__ == "__main__":
    main()
