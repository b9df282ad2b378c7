"""The installed fork's EAGLE3 contract at run time: early refusal while the speculative config is validated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm._fork import eagle3
from vllm._fork.eagle3 import NOT_IMPLEMENTED, refuse_known_unsupported_target

PROBE = Path(__file__).parent / "scripts" / "spec_config_probe.py"


def _spec(method: str, arch: str | None = None, use_aux: bool | None = None) -> SimpleNamespace:
    eagle_config = {} if use_aux is None else {"use_aux_hidden_state": use_aux}
    draft = SimpleNamespace(hf_config=SimpleNamespace(eagle_config=eagle_config))
    target = SimpleNamespace(architecture=arch, architectures=[arch], hf_config=SimpleNamespace(architectures=[arch]))
    return SimpleNamespace(method=method, draft_model_config=draft, target_model_config=target)


# A stand-in refusal: on 0.33.0 the table is empty (every formerly refused target captures), so the mechanism
# is exercised with an entry of the shape a new base would need.
REFUSED = {"DeclaredWithoutCaptureForCausalLM": ("its decoder records no aux hidden states", "method mtp")}


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """Real engine-config validation (EngineArgs.create_engine_config) in one subprocess for all cases."""
    out = tmp_path_factory.mktemp("probe") / "results.json"
    cases = ["MiMoForCausalLM:eagle3", "Qwen2ForCausalLM:eagle3", "MiMoForCausalLM:ngram"]
    done = subprocess.run([sys.executable, str(PROBE), str(out), *cases], capture_output=True, text=True,
                          cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_refusal_table_is_empty_on_this_base():
    assert NOT_IMPLEMENTED == {}


def test_engine_config_accepts_eagle3_on_a_formerly_refused_target(probed):
    # MiMo declared SupportsEagle3 upstream without capture and was refused here; its decoder captures now.
    assert probed["MiMoForCausalLM:eagle3"] == {"accepted": True, "error": ""}
    assert probed["Qwen2ForCausalLM:eagle3"] == {"accepted": True, "error": ""}
    assert probed["MiMoForCausalLM:ngram"] == {"accepted": True, "error": ""}


@pytest.mark.parametrize("method", ["eagle3", "dflash", "dspark", "extract_hidden_states"])
def test_every_aux_state_method_is_refused_on_a_listed_target(monkeypatch, method):
    monkeypatch.setattr(eagle3, "NOT_IMPLEMENTED", REFUSED)
    arch = next(iter(REFUSED))
    with pytest.raises(ValueError, match=f"method '{method}' cannot run on {arch}: .*Use method mtp instead"):
        refuse_known_unsupported_target(_spec(method, arch))


@pytest.mark.parametrize("spec", [
    _spec("mtp", "DeclaredWithoutCaptureForCausalLM"),
    _spec("ngram", "DeclaredWithoutCaptureForCausalLM"),
    _spec("eagle3", "DeclaredWithoutCaptureForCausalLM", use_aux=False),  # an EAGLE-3 head trained without aux
    _spec("eagle3", "LlamaForCausalLM"),
    SimpleNamespace(method="eagle3", target_model_config=None, draft_model_config=None),
], ids=["mtp", "ngram", "eagle3-no-aux", "not-listed", "no-target"])
def test_what_is_not_refused(monkeypatch, spec):
    monkeypatch.setattr(eagle3, "NOT_IMPLEMENTED", REFUSED)
    refuse_known_unsupported_target(spec)
