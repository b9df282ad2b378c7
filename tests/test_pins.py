"""The single upstream pin: parsed like pip reads it, malformed pins refused."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from forktool.errors import ForkError
from forktool.pins import load_pin


def test_repository_pin_is_one_vllm_release_with_wheel_and_sdist(project):
    pin = project.pin
    assert (pin.name, len(pin.hashes)) == ("vllm", 2) and re.fullmatch(r"\d+\.\d+\.\d+", pin.version)


def test_pip_itself_accepts_the_pin_for_the_cached_wheel(project, upstream_wheel, tmp_path):
    # Hash-checking mode, offline, with the engine's cached file as the only candidate.
    wheel, _ = upstream_wheel
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-index",
                           "--find-links", str(wheel.parent), "--only-binary=:all:", "--platform",
                           "manylinux_2_28_x86_64", "--python-version", "3.12", "--require-hashes",
                           "-r", str(project.root / "requirements/upstream.txt"), "-d", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / wheel.name).exists()


@pytest.mark.parametrize("text, message", [
    ("vllm>=0.33.0 --hash=sha256:" + "a" * 64, "must name one exact release with '=='"),
    ("vllm==0.33.0", "has no --hash=sha256"),
    ("vllm==0.33.0 --hash=md5:abc", "unexpected '--hash=md5:abc'"),
    ("vllm==0.33.0 --hash=sha256:" + "a" * 64 + "\ntorch==2.14.0 --hash=sha256:" + "b" * 64,
     "expected exactly one pinned requirement, found 2"),
    ("# nothing", "found 0"),
])
def test_malformed_pins(tmp_path, text, message):
    path = tmp_path / "upstream.txt"
    path.write_text(text + "\n")
    with pytest.raises(ForkError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_pin(path)


def test_continuations_and_comments(tmp_path):
    path = tmp_path / "upstream.txt"
    path.write_text("# top\nvllm==1.2.3 \\\n    --hash=sha256:" + "c" * 64 + "  # the wheel\n")
    pin = load_pin(path)
    assert (pin.requirement, pin.hashes) == ("vllm==1.2.3", frozenset({"c" * 64}))


def test_a_test_only_base_names_its_build_flags_and_they_become_build_options(project):
    from forktool.options import BuildOptions
    from forktool.project import Project

    cpu = Project(project.root, "requirements/cpu-base.txt")
    assert project.pin.build_flags == ()  # the real pin builds with none
    assert cpu.pin.build_flags[0] == "--allow-absent"
    options = BuildOptions.from_flags(cpu.pin.build_flags, cpu.pin_file, recompress=True)
    assert options.allow_absent and options.recompress and options.label is None
    assert "edits/vllm/engine/arg_utils.py.fork.toml:accept-dflash2-alias" in options.skip
    assert len(options.skip) == cpu.pin.build_flags.count("--skip")  # each --skip names one edit
    assert options.skip <= {f"{e.spec_file}:{e.id}" for e in project.edits()}
    with pytest.raises(ForkError, match=r"cpu-base.txt: unknown build flag\(s\) \['--allow-all'\]"):
        BuildOptions.from_flags(("--allow-all",), cpu.pin_file)
