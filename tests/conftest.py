"""Shared fixtures: the real fork project, the pinned upstream artifacts, and everything expensive built once."""

# Building, assembling and classifying the fork take minutes on the CI machine, so each happens once per session
# (`fork_wheel`, `fork_sources`, `fork_audit`, `cpu_fork_build`), never at collection. Under pytest-xdist
# (`make test`) each worker is a session: `cpu_fork_build` is shared between them through a file lock, the
# in-memory sources and audit are made by each worker that needs them.

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import FileLock

from forktool.assembly import Assembly, assemble
from forktool.fetch import cache_root, fetch
from forktool.project import REPO_ROOT, Project
from forktool.sourcetree import SourceTree
from fork_testing import CPU_BUILD, SIGNOFF, UPSTREAM_VERSION, WHEEL_NAME, run_forktool

# KV pools per page size are opt-in (vllm/_fork/kv_pages.py); the tests prove them, so this process and every
# engine it starts opt in. tests/test_kv_pages.py checks the default (off) with the variable unset.
os.environ.setdefault("VLLM_FORK_KV_POOLS", "on")

# `make test` hands whole files to two pytest-xdist workers in collection order (--no-loadscope-reorder): the
# longest files go first, so that no long file starts last and runs alone. The order is from CI's durations
# (benchmarks/ci_time.md); files not named keep pytest's order after these.
LONGEST_FIRST = ("test_cpu_e2e.py", "test_spec_check.py", "test_glm5_speculative.py", "test_gpu_constructed.py",
                 "test_glm5_recoverssm_layer.py", "test_kda_recoverssm_glm.py",
                 "test_gpu_dry_run.py", "test_tree.py", "test_check.py", "test_spec_check_corpus.py", "test_export.py",
                 "test_build.py", "test_glm5_kv_plan.py", "test_eagle3_contract.py", "test_oracle_engines.py",
                 "test_installed.py", "test_audit_real.py", "test_spec_check_kv_report.py", "test_seed_pairs_kv.py",
                 "test_spec_check_corpus_gpu_host.py")


def pytest_collection_modifyitems(items):
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: within a file, pytest's order


@pytest.fixture(scope="session")
def project() -> Project:
    return Project(REPO_ROOT)


@pytest.fixture(scope="session")
def upstream_wheel(project) -> tuple[Path, str]:
    """The pinned vllm wheel (path, sha256), downloaded once into the engine's cache."""
    return fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)


@pytest.fixture(scope="session")
def upstream_sdist(project) -> tuple[Path, str]:
    return fetch(project.pin.name, project.pin.version, "sdist", project.pin.hashes)


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A throwaway copy of the fork's own inputs (edits, overlay, pin, pyproject) to break on purpose."""
    root = tmp_path / "repo"
    for name in ("edits", "vllm", "requirements", "upstream-prs", "pyproject.toml"):
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            root.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    return root


@pytest.fixture(scope="session")
def fork_wheel(tmp_path_factory) -> Path:
    """The fork wheel built through the CLI like a user does: the one `make test` just built, or built here once."""
    given = os.environ.get("FORK_WHEEL")  # set by `make test` to the wheel it built and installed
    if given:
        assert Path(given).name == WHEEL_NAME and Path(given).is_file(), f"FORK_WHEEL={given}: not a built fork wheel"
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    done = run_forktool("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out / WHEEL_NAME)
    return out / WHEEL_NAME


class Sources(NamedTuple):
    """The pinned wheel (open for the session), the fork assembled over it, and both source trees."""

    wheel: zipfile.ZipFile
    assembled: Assembly
    fork: SourceTree
    upstream: SourceTree


@cache
def fork_sources() -> Sources:
    """The fork's edits and overlay applied to the pinned wheel's sources in memory, once per session."""
    from forktool.audit.run import fork_and_upstream

    project = Project(REPO_ROOT)
    path, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
    wheel = zipfile.ZipFile(path)  # stays open: the trees read upstream files from it lazily
    assembled = assemble(project, SourceTree.from_zip(wheel))
    return Sources(wheel, assembled, *fork_and_upstream(project, wheel, assembled))


class Audit(NamedTuple):
    """The audit of the pinned release and of the fork: the fork alone and the fork against upstream."""

    upstream: tuple
    fork: tuple
    fork_vs_upstream: tuple


@cache
def fork_audit() -> Audit:
    """Every architecture classified on upstream and on the fork, once per session."""
    from forktool.audit.classify import against_baseline, classify

    sources = fork_sources()
    upstream, fork = classify(sources.upstream), classify(sources.fork)
    return Audit(tuple(upstream), tuple(fork), tuple(against_baseline(fork, upstream)))


@pytest.fixture(scope="session", name="fork_sources")
def fork_sources_fixture() -> Sources:
    return fork_sources()


@pytest.fixture(scope="session", name="fork_audit")
def fork_audit_fixture() -> Audit:
    return fork_audit()


def shared_dir(tmp_path_factory) -> Path:
    """The temp folder every pytest-xdist worker of this run sees (the run's own when there are no workers)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def stock_python(upstream_wheel) -> Path:
    """The pinned wheel's Python files with their bytecode: put first on PYTHONPATH, they are stock 0.33.0 (its
    kernels are not needed by what imports them). Extracted and compiled once per machine into the download cache,
    keyed by the wheel's sha256 (a later run imports without compiling ≈ 1,100 modules again)."""
    out = cache_root() / "stock-python" / upstream_wheel[1]
    with FileLock(f"{out}.lock"):
        if not (out / ".complete").exists():
            shutil.rmtree(out, ignore_errors=True)
            with zipfile.ZipFile(upstream_wheel[0]) as wheel:
                wheel.extractall(out, [n for n in wheel.namelist() if n.endswith(".py")])
            compileall.compile_dir(out, quiet=2, workers=2)
            (out / ".complete").touch()  # last: an interrupted extraction is done again
    return out


@pytest.fixture(scope="session")
def cpu_fork_build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The fork built over the test-only base once per run, through the CLI: (the process, its out folder)."""
    # Two workers need it (test_build, test_cpu_e2e): the first builds, the other waits for its result.
    out = shared_dir(tmp_path_factory) / "cpu-fork"
    record = out / "build.json"
    with FileLock(f"{out}.lock"):
        if not record.exists():
            done = run_forktool(*CPU_BUILD, "--out", str(out))
            record.write_text(json.dumps([done.args, done.returncode, done.stdout, done.stderr]))
    return subprocess.CompletedProcess(*json.loads(record.read_text())), out


# ---- the exported PR series applied to the pinned sdist, once per run ----

@pytest.fixture(scope="session")
def exported_series(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`forktool export-pr` once per run with a fixed sign-off: (the process, its out folder)."""
    out = tmp_path_factory.mktemp("export") / "pr"
    env = dict(os.environ, FORKTOOL_SIGNOFF=SIGNOFF)
    return run_forktool("export-pr", "--out", str(out), env=env), out


@pytest.fixture(scope="session")
def series_checkout(exported_series, upstream_sdist, tmp_path_factory) -> tuple[Path, list[str]]:
    """The sdist's Python files with its pyproject.toml and hook config in a git repo, the series applied with
    `git am`: (the checkout, the paths the series touches)."""
    done, out = exported_series
    assert done.returncode == 0, done.stderr
    patches = sorted(out.glob("*.patch"))
    touched = sorted({line[len("+++ b/"):] for p in patches for line in p.read_text().splitlines()
                      if line.startswith("+++ b/")})
    top = f"vllm-{UPSTREAM_VERSION}/"
    # Every Python file too: ruff sorts `from vllm.x import` as first-party only where vllm/x exists.
    wanted = {"pyproject.toml", ".pre-commit-config.yaml", ".dockerignore"} | set(touched)
    # The hooks read these: Buildkite's test definitions and the hook scripts with their data files.
    kept = (".buildkite/", "tools/pre_commit/")
    work = tmp_path_factory.mktemp("sdist-series")
    with tarfile.open(upstream_sdist[0]) as sdist:
        members = [m for m in sdist.getmembers() if m.name.removeprefix(top) in wanted or m.name.endswith(".py")
                   or m.name.removeprefix(top).startswith(kept)]
        for member in members:
            member.name = member.name.removeprefix(top)
        sdist.extractall(work, members, filter="data")
    git = ["git", "-c", "user.name=base", "-c", "user.email=base@example.com"]
    subprocess.run(git + ["init", "-q"], cwd=work, check=True)
    subprocess.run(git + ["add", "-A"], cwd=work, check=True)
    subprocess.run(git + ["commit", "-qm", f"vllm {UPSTREAM_VERSION} sdist (touched files)"], cwd=work, check=True)
    applied = subprocess.run(git + ["am", "--keep-non-patch", *map(str, patches)], cwd=work,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return work, touched
# ---- end of the export-pr block ----
