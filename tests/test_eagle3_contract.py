"""The installed fork's EAGLE3 contract at run time: early refusal while the speculative config is validated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm._fork.eagle3 import NOT_IMPLEMENTED, refuse_known_unsupported_target

PROBE = Path(__file__).parent / "scripts" / "spec_config_probe.py"


def _spec(method: str, arch: str | None = None, use_aux: bool | None = None) -> SimpleNamespace:
    eagle_config = {} if use_aux is None else {"use_aux_hidden_state": use_aux}
    draft = SimpleNamespace(hf_config=SimpleNamespace(eagle_config=eagle_config))
    target = SimpleNamespace(architecture=arch, architectures=[arch], hf_config=SimpleNamespace(architectures=[arch]))
    return SimpleNamespace(method=method, draft_model_config=draft, target_model_config=target)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """Real engine-config validation (EngineArgs.create_engine_config) in one subprocess for all cases."""
    out = tmp_path_factory.mktemp("probe") / "results.json"
    cases = [f"{arch}:eagle3" for arch in NOT_IMPLEMENTED] + ["Qwen2ForCausalLM:eagle3", "MiMoForCausalLM:ngram"]
    done = subprocess.run([sys.executable, str(PROBE), str(out), *cases], capture_output=True, text=True,
                          cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("arch", sorted(NOT_IMPLEMENTED))
def test_engine_config_refuses_eagle3_on_declared_not_implemented_targets(probed, arch):
    result = probed[f"{arch}:eagle3"]
    assert not result["accepted"]
    reason, alternative = NOT_IMPLEMENTED[arch]
    assert f"speculative method 'eagle3' cannot run on {arch}" in result["error"]
    assert f"Use {alternative} instead" in result["error"]


def test_engine_config_still_accepts_what_works(probed):
    assert probed["Qwen2ForCausalLM:eagle3"] == {"accepted": True, "error": ""}
    assert probed["MiMoForCausalLM:ngram"] == {"accepted": True, "error": ""}  # no aux states needed


@pytest.mark.parametrize("method", ["eagle3", "dflash", "dspark", "extract_hidden_states"])
def test_every_aux_state_method_is_refused(method):
    with pytest.raises(ValueError, match=f"method '{method}' cannot run on MiMoForCausalLM"):
        refuse_known_unsupported_target(_spec(method, "MiMoForCausalLM"))


@pytest.mark.parametrize("spec", [
    _spec("mtp", "MiMoForCausalLM"),
    _spec("ngram", "Exaone4_5_ForConditionalGeneration"),
    _spec("eagle3", "MiMoForCausalLM", use_aux=False),  # an EAGLE-3 head trained without aux states
    _spec("eagle3", "LlamaForCausalLM"),
    SimpleNamespace(method="eagle3", target_model_config=None, draft_model_config=None),
], ids=["mtp", "ngram", "eagle3-no-aux", "declared-and-implemented", "no-target"])
def test_what_is_not_refused(spec):
    refuse_known_unsupported_target(spec)
