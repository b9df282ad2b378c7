"""`tree`: the pinned sdist with the same edits and overlay, and it still builds into a fork wheel."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fork_testing import FORK_VERSION, run_forktool

EDITED = "vllm/models/kimi_k3/amd/linear.py"


@pytest.fixture(scope="module")
def tree(tmp_path_factory, upstream_sdist) -> Path:
    out = tmp_path_factory.mktemp("tree")
    done = run_forktool("tree", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out / f"vllm-{FORK_VERSION}")
    return out / f"vllm-{FORK_VERSION}"


def test_tree_carries_edits_overlay_and_manifest(tree, project):
    assert (tree / "setup.py").is_file() and (tree / "CMakeLists.txt").is_file()
    source = (tree / EDITED).read_text()
    [cls] = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "KimiLinearForCausalLM"]
    assert "SupportsEagle3" in [b.id for b in cls.bases if isinstance(b, ast.Name)]
    for path, data in project.overlay().items():
        assert (tree / path).read_bytes() == data
    assert FORK_VERSION in (tree / "vllm/_fork/_manifest.py").read_text()


def test_tree_rebuild_replaces_and_failed_tree_leaves_old_one(tree, repo_copy, upstream_sdist):
    out = repo_copy / "build"
    assert run_forktool("tree", "--out", str(out), repo=repo_copy).returncode == 0
    spec = repo_copy / "edits/vllm/models/kimi_k3/amd/linear.py.toml"
    spec.write_text(spec.read_text().replace('class = "KimiLinearForCausalLM"', 'class = "Gone"'))
    done = run_forktool("tree", "--out", str(out), repo=repo_copy)
    assert done.returncode == 1 and "matched 0 place(s)" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [f"vllm-{FORK_VERSION}"]  # no partial folder
    assert "SupportsEagle3" in (out / f"vllm-{FORK_VERSION}" / EDITED).read_text()


def test_tree_builds_into_the_fork_wheel_with_precompiled_kernels(tree, upstream_wheel, tmp_path):
    # The CUDA build box runs the same command without VLLM_USE_PRECOMPILED (README); here the
    # upstream kernels are reused so that the Python side of the tree is built for real on the CPU.
    env = dict(os.environ, VLLM_USE_PRECOMPILED="1", VLLM_PRECOMPILED_WHEEL_LOCATION=str(upstream_wheel[0]),
               VLLM_VERSION_OVERRIDE=FORK_VERSION, VLLM_SKIP_VERSION_SUFFIX="1")
    work = tmp_path / "src"
    subprocess.run(["cp", "-r", str(tree), str(work)], check=True)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                           str(work), "-w", str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "out").glob(f"vllm-{FORK_VERSION}-*.whl")
    with zipfile.ZipFile(wheel) as built:
        assert "SupportsEagle3," in built.read(EDITED).decode()
        assert "vllm/_fork/_manifest.py" in built.namelist()
        assert "vllm/_fork/__main__.py" in built.namelist()
