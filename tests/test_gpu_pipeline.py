"""`.buildkite/pipeline.yml` against Buildkite's own pipeline schema (pinned buildkite-sdk's schema.json), and the
wheel comparison its optional CMake step runs."""

from __future__ import annotations

import copy
import importlib.resources
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / ".buildkite" / "pipeline.yml"
SCRIPTS = REPO / "tests" / "scripts"
PARAMETER = re.compile(r"^\$\{[A-Z_]+:-[^}]+\}$")


@pytest.fixture(scope="module")
def pipeline() -> dict:
    return yaml.safe_load(PIPELINE.read_text())


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(importlib.resources.files("buildkite_sdk").joinpath("schema.json").read_text())
    return jsonschema.Draft7Validator(schema)


def test_pipeline_validates_against_buildkites_schema(pipeline, validator):
    assert [e.message for e in validator.iter_errors(pipeline)] == []


def test_the_schema_rejects_a_broken_pipeline(pipeline, validator):
    broken = copy.deepcopy(pipeline)
    broken["steps"][0]["timeout_in_minutes"] = "thirty"
    assert list(validator.iter_errors(broken))
    assert list(validator.iter_errors({"env": pipeline["env"]}))  # no steps


def test_every_step_the_issue_asks_for(pipeline):
    steps = {step["key"]: step for step in pipeline["steps"]}
    assert list(steps) == ["wheel", "cpu-tests", "gpu-check", "docker-smoke", "cmake-build"]
    assert steps["wheel"]["command"] == "python3 -m pip wheel . --no-deps -w dist"
    assert steps["cpu-tests"]["command"] == "make test"
    assert any("tests/scripts/gpu_check.py" in c for c in steps["gpu-check"]["commands"])
    assert any("docker build -f docker/Dockerfile" in c for c in steps["docker-smoke"]["commands"])
    assert any("TORCH_CUDA_ARCH_LIST=9.0a" in c for c in steps["cmake-build"]["commands"])
    assert steps["cmake-build"]["if"] == 'build.env("FORK_CMAKE_BUILD") == "1"'  # optional


def test_queues_and_images_are_parameters(pipeline):
    for step in pipeline["steps"]:
        assert PARAMETER.match(step["agents"]["queue"]), step["key"]
    for name in ("UPSTREAM_IMAGE", "FORK_IMAGE", "CPU_QUEUE", "GPU_QUEUE", "BUILD_QUEUE"):
        assert PARAMETER.match(pipeline["env"][name]), name
    assert "vllm/vllm-openai" not in "".join(c for s in pipeline["steps"] for c in s.get("commands", []))


def test_scripts_the_pipeline_runs_exist(pipeline):
    text = PIPELINE.read_text()
    for script in re.findall(r"tests/scripts/[\w.]+", text):
        assert (REPO / script).is_file(), script


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_wheel_comparison_finds_python_differences_only(tmp_path):
    ours = _wheel(tmp_path / "a.whl", {"vllm/a.py": b"x = 1\n", "vllm/_C.abi3.so": b"\0one"})
    same = _wheel(tmp_path / "b.whl", {"vllm/a.py": b"x = 1\n", "vllm/_C.abi3.so": b"\0two"})
    other = _wheel(tmp_path / "c.whl", {"vllm/a.py": b"x = 2\n", "vllm/b.py": b""})
    script = str(SCRIPTS / "gpu_compare_wheels.py")

    def run(*args):
        return subprocess.run([sys.executable, script, *map(str, args)], capture_output=True, text=True)

    assert run(ours, same).returncode == 0
    done = run(ours, other)
    assert done.returncode == 1
    assert done.stdout.splitlines()[:2] == ["only in the second wheel: vllm/b.py", "differs: vllm/a.py"]
    assert run(ours, tmp_path / "missing.whl").returncode == 2
