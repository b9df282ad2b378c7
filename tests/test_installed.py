"""The fork wheel as installed in the test environment (`make test` installs it): import, manifest, contract."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from types import SimpleNamespace

import pytest
import torch

from fork_testing import FORK_VERSION, UPSTREAM_VERSION, skeleton
import vllm  # the fork wheel, installed over upstream's dependencies by `make test`


def test_installed_vllm_is_the_fork(project):
    assert metadata.version("vllm") == f"{project.pin.version}+{project.label}"
    assert vllm.__version__ == f"{project.pin.version}+{project.label}"


def test_manifest_prints_and_matches_this_checkout(project):
    done = subprocess.run([sys.executable, "-m", "vllm._fork", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["upstream"]["sha256"] in project.pin.hashes
    assert {e["sha256"] for e in data["edits"]} == {e.checksum for e in project.edits()}
    human = subprocess.run([sys.executable, "-m", "vllm._fork"], capture_output=True, text=True).stdout
    assert human.startswith(f"vllm {FORK_VERSION} (fork of vllm {UPSTREAM_VERSION}")
    assert "clean    vllm/models/kimi_k3/amd/linear.py :: declare-supports-eagle3" in human


def test_rocm_kimi_linear_passes_the_runner_eagle3_setup():
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3
    from vllm.models.kimi_k3.amd.linear import KimiLinearForCausalLM, KimiLinearModel
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

    assert supports_eagle3(KimiLinearForCausalLM)
    assert issubclass(KimiLinearModel, EagleModelMixin)
    outer, inner = skeleton(KimiLinearForCausalLM), skeleton(KimiLinearModel)
    outer.model = inner
    # A dspark/DFlash-style draft config: target_layer_ids are shifted by one by the runner.
    draft = SimpleNamespace(hf_config=SimpleNamespace(dflash_config={"target_layer_ids": [1, 30, 57]}))
    set_eagle3_aux_hidden_state_layers(outer, SimpleNamespace(draft_model_config=draft))
    assert inner.aux_hidden_state_layers == (2, 31, 58)
    # With no layer ids in the draft config the protocol's default reads the inner layer count.
    inner.layers = torch.nn.ModuleList(torch.nn.Identity() for _ in range(61))
    assert outer.get_eagle3_default_aux_hidden_state_layers() == (2, 30, 58)


@pytest.mark.parametrize("module, name", [
    ("vllm.models.kimi_k3.nvidia.model", "KimiLinearForCausalLM"),
    ("vllm.model_executor.models.qwen3_next", "Qwen3NextForCausalLM"),
])
def test_guarded_reported_classes_still_declare_the_contract(module, name):
    from vllm.model_executor.models.interfaces import supports_eagle3

    cls = getattr(__import__(module, fromlist=[name]), name)
    assert supports_eagle3(cls)
