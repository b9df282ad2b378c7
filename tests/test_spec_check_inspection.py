"""spec-check answers vLLM's registry inspection in its own process: same answer, same cache, no second interpreter."""

from __future__ import annotations

import json

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
