"""spec-check does its work in its own process: vLLM's registry inspection (same answer, same cache) runs there, and
no library starts background builds beside it."""

from __future__ import annotations

import argparse
import json
import os
import subprocess

from vllm._fork.spec_check import cli
from vllm._fork.spec_check.inspection import inspect_in_process

ARCH = "LlamaForCausalLM"


def test_a_cache_miss_is_inspected_here_with_vllms_answer_and_cache(tmp_path, monkeypatch):
    from vllm.model_executor.models import registry

    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path))  # an empty cache: vLLM would start a subprocess

    run = registry.subprocess.run

    def no_second_interpreter(command, *args, **kwargs):
        if command == registry._SUBPROCESS_COMMAND:  # the registry's own inspection process
            raise AssertionError(f"inspected in a subprocess: {command}")
        return run(command, *args, **kwargs)

    monkeypatch.setattr(registry.subprocess, "run", no_second_interpreter)
    model = registry.ModelRegistry.models[ARCH]
    in_subprocess = registry._run_in_subprocess
    with inspect_in_process():
        info = model.inspect_model_cls()
    assert registry._run_in_subprocess is in_subprocess  # vLLM's own path is back after the build
    assert info == registry._ModelInfo.from_model_cls(model.load_model_cls())
    [cached] = (tmp_path / "modelinfos").glob(f"*{ARCH}.json")  # written as vLLM writes it, read first next time
    assert json.loads(cached.read_text())["modelinfo"]["architecture"] == ARCH


def test_no_background_builds_are_started_while_spec_check_runs(monkeypatch):
    """humming, imported with the model classes, prebuilds its CUDA helpers in two background Python processes
    unless told not to; spec-check tells it before it parses (and so before any model class is imported)."""
    [(name, value)] = cli.NO_BACKGROUND_BUILDS.items()
    monkeypatch.setenv(name, "unset below")  # so that monkeypatch restores the variable's absence afterwards
    monkeypatch.delenv(name)
    seen = {}

    def parser_that_records_the_environment():
        seen[name] = os.environ.get(name)
        return argparse.ArgumentParser()

    monkeypatch.setattr(cli, "build_parser", parser_that_records_the_environment)
    monkeypatch.setattr("vllm._fork.spec_check.platform.install_if_unspecified", lambda gpu: None)
    monkeypatch.setattr(cli, "execute", lambda args: 0)
    assert cli.main([]) == 0 and seen == {name: value}

    monkeypatch.setenv(name, "0")  # a user's own setting is kept
    cli.main([])
    assert seen == {name: "0"}

    def no_process(command, *args, **kwargs):
        raise AssertionError(f"background build started: {command}")

    monkeypatch.setenv(name, value)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    from humming.ops import utils as launcher  # the library's own gates read the variable
    from humming.utils import nvrtc

    assert launcher.build_humming_launcher_in_bg() is None and nvrtc.build_nvrtc_compile_binary_in_bg() is None
