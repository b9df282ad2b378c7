"""The repository holds only the fork's own files: overlay paths are new, nothing is a copy of upstream."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import subprocess
import zipfile

from fork_testing import UPSTREAM_VERSION, WHEEL_NAME



def _upstream_index(wheel_path):
    with zipfile.ZipFile(wheel_path) as wheel:
        record = wheel.read(f"vllm-{UPSTREAM_VERSION}.dist-info/RECORD").decode()
        names = set(wheel.namelist())
    digests = {row[1] for row in csv.reader(io.StringIO(record)) if row[1]}
    return names, digests


def test_overlay_paths_are_new_and_no_file_is_a_copy(project, upstream_wheel):
    names, digests = _upstream_index(upstream_wheel[0])
    overlay = project.overlay()
    assert overlay, "the overlay holds at least the provenance package"
    for path, data in overlay.items():
        assert path not in names, f"{path} exists upstream"
        digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest not in digests, f"{path} is byte-identical to an upstream file"


def test_every_spec_targets_an_upstream_python_file_and_edits_still_parse(project, upstream_wheel, fork_sources):
    names, _ = _upstream_index(upstream_wheel[0])
    assert {e.target for e in project.edits()} <= names
    fork = fork_sources.assembled
    assert fork.changed
    for path, text in fork.changed.items():
        compile(text, path, "exec")


def test_readme_commands_are_the_ones_ci_and_docker_use(project):
    readme = (project.root / "README.md").read_text()
    ci = (project.root / ".ci/run").read_text()
    assert "pip wheel . --no-deps -w dist" in readme and "make test" in readme
    assert re.search(r"^make test\b", ci, flags=re.M)
    makefile = (project.root / "Makefile").read_text()
    assert "pip wheel . --no-deps -w dist" in makefile


def test_dockerfile_copies_the_wheel_that_build_makes(project):
    dockerfile = (project.root / "docker/Dockerfile").read_text()
    assert f"ARG UPSTREAM_IMAGE=vllm/vllm-openai:v{project.pin.version}\n" in dockerfile
    assert re.search(rf"^ARG FORK_WHEEL={re.escape(WHEEL_NAME)}$", dockerfile, flags=re.M)
    assert "COPY dist/${FORK_WHEEL}" in dockerfile
    # The name the engine gives its wheel (see test_build): upstream's tags, fork version.
    assert WHEEL_NAME == f"vllm-{project.pin.version}+{project.label}-cp38-abi3-manylinux_2_28_x86_64.whl"


# A home, root or workspace folder of the machine a run happened on (the oracles' scratch folder is <work>).
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:root|home|work)/")


def test_committed_files_name_no_folder_of_a_machine(project):
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=project.root, capture_output=True, check=True).stdout
    offenders = []
    for name in filter(None, listed.decode().split("\0")):
        path = project.root / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files and paths git lists but this checkout lacks
        offenders += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if MACHINE_PATH.search(line)]
    assert not offenders, offenders
