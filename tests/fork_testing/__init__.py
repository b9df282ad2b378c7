"""What the tests share besides fixtures: the versions named from the pin, the real CLI, and ways to run a model
class's real forward without its constructor. Imported as `fork_testing` (tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from forktool.pins import load_pin
from forktool.project import REPO_ROOT, Project

# The pinned release and the fork's version over it: tests name them from here, never by number.
UPSTREAM_PIN = load_pin(REPO_ROOT / "requirements/upstream.txt")
UPSTREAM_VERSION = UPSTREAM_PIN.version
FORK_VERSION = f"{UPSTREAM_VERSION}+{Project().label}"
# What `build` names the fork wheel; docker/Dockerfile copies exactly this file.
WHEEL_NAME = f"vllm-{FORK_VERSION}-cp38-abi3-manylinux_2_28_x86_64.whl"

# How the fork is built over the second, test-only base: with the flags its pin file names.
CPU_PIN = "requirements/cpu-base.txt"
CPU_BUILD = ("build", "--pin", CPU_PIN, *load_pin(REPO_ROOT / CPU_PIN).build_flags)

PROVENANCE = {
    "why": "fixture",
    "upstream": "fork-only: test fixture",
    "remove_when": "never: test fixture",
}

SIGNOFF = "Fork Tester <fork-tester@example.com>"
# A four-layer decoder config small enough for config-only tests (VllmConfig, SpeculativeConfig, the KV planner).
TINY_DECODER = {"vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4,
                "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
                "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}


def run_forktool(*args: str, repo: Path | None = None, env: dict | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, as a user runs it."""
    command = [sys.executable, "-m", "forktool"]
    if repo is not None:
        command += ["--repo", str(repo)]
    return subprocess.run(command + list(args), capture_output=True, text=True, env=env,
                          cwd=cwd or REPO_ROOT)


def load_class(key: str):
    """The class `package.module.Class` as Python imports it."""
    module, _, name = key.rpartition(".")
    return getattr(importlib.import_module(module), name)


def assert_aux_states(out, chosen, last: int, expected, name: str) -> None:
    """An EAGLE3 forward's output: (hidden after layer `last`, the stream at each chosen layer), as expected(layer)."""
    import torch

    assert isinstance(out, tuple), f"{name}: forward dropped the aux hidden states ({type(out).__name__})"
    hidden, aux = out
    torch.testing.assert_close(hidden, expected(last))
    assert len(aux) == len(chosen)
    for layer, state in zip(chosen, aux):
        torch.testing.assert_close(state, expected(layer), msg=lambda m, layer=layer: f"{name}: aux state {layer}: {m}")


def one_pipeline_rank(monkeypatch) -> None:
    """One pipeline rank, as on a single GPU: a decoder's forward asks the PP group about its position."""
    from types import SimpleNamespace

    from vllm.distributed import parallel_state

    group = SimpleNamespace(is_first_rank=True, is_last_rank=True, world_size=1, rank_in_group=0)
    monkeypatch.setattr(parallel_state, "_PP", group)


def skeleton(cls):
    """An nn.Module instance without running its __init__ (which needs a full VllmConfig and GPUs).

    object.__new__, not cls.__new__: MiniCPMO's __new__ picks a versioned class from a config."""
    import torch

    instance = object.__new__(cls)
    torch.nn.Module.__init__(instance)
    return instance


def real_chain(outer: str, path) -> list:
    """The class `outer` and each (attribute, class) of `path` under it, built without __init__ and wired as the
    constructor would (each is the named attribute of the one above), forward run eagerly: [outer, …, decoder]."""
    chain = []
    for attr, key in [(None, outer), *path]:
        instance = skeleton(load_class(key))
        instance.do_not_compile = True  # @support_torch_compile's __call__ reads it; run forward eagerly
        if chain:
            setattr(chain[-1], attr, instance)
        chain.append(instance)
    return chain
