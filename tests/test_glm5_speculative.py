"""GLM-5.3-Flash speculative configs, stock 0.34.0 against the fork: MTP's defects and method dflash2.

Both sides run the same probe script (tests/scripts/glm5_spec_probe.py) in a subprocess: the fork as
installed in this environment, stock as the pinned wheel's Python files first on PYTHONPATH (the probe
builds configs and one module on the CPU; no compiled kernel is needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).parent / "scripts" / "glm5_spec_probe.py"


def _start(out: Path, pythonpath: Path | None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.Popen([sys.executable, str(PROBE), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=out.parent)


@pytest.fixture(scope="module")
def probes(tmp_path_factory, stock_python) -> dict:
    """The probe on the fork and on stock, side by side (each is one import-heavy process, one per core)."""
    outs = {"fork": (tmp_path_factory.mktemp("fork") / "fork.json", None),
            "stock": (tmp_path_factory.mktemp("stock") / "stock.json", stock_python)}
    running = {side: _start(out, path) for side, (out, path) in outs.items()}
    results = {}
    for side, process in running.items():
        _, stderr = process.communicate(timeout=900)
        assert process.returncode == 0, f"{side}: {stderr[-3000:]}"
        results[side] = json.loads(outs[side][0].read_text())
    return results


@pytest.fixture(scope="module")
def fork(probes) -> dict:
    return probes["fork"]


@pytest.fixture(scope="module")
def stock(probes) -> dict:
    return probes["stock"]


def test_text_only_checkpoint_selects_the_glm_mtp_draft(stock, fork):
    # 0.34.0 accepts the config but keeps the target's own class as the "draft": no MTP module is built.
    assert (stock["mtp_text_only"]["draft_model_type"], stock["mtp_text_only"]["draft_architectures"]) == (
        "glm5_next_text", ["Glm5NextForCausalLM"])
    draft = fork["mtp_text_only"]
    assert (draft["ok"], draft["draft_model_type"], draft["draft_architectures"]) == (
        True, "glm5_next_mtp", ["Glm5NextMTPModel"])
    assert draft["draft_use_mla"] is True  # the renamed text config is still planned as MLA
    assert fork["mtp_flat"] == stock["mtp_flat"]  # what already worked is unchanged


def test_two_mtp_layers_take_the_multi_module_speculator(stock, fork):
    # Only the multi-module speculator passes spec_step_idx, so only it runs layer k at step k. 0.34.0 counts the
    # MTP modules by n_predict itself (SpeculativeConfig.num_mtp_modules): the fork's 0.33.0 edit was dropped.
    assert stock["mtp_nested_two_layers"]["multi_module_mtp"] is True
    assert fork["mtp_nested_two_layers"] == stock["mtp_nested_two_layers"]


def test_method_dflash2_runs_the_dflash2_draft_under_dflash(stock, fork):
    assert stock["dflash2_alias"]["ok"] is False
    assert "Unknown speculative method 'dflash2'" in stock["dflash2_alias"]["error"]
    assert fork["dflash2_alias"] == fork["dflash_with_dflash2_draft"] == stock["dflash_with_dflash2_draft"]
    assert (fork["dflash2_alias"]["method"], fork["dflash2_alias"]["draft_architectures"]) == (
        "dflash", ["DFlash2DraftModel"])


def test_method_dflash2_with_a_dflash1_checkpoint_says_what_to_use(fork):
    error = fork["dflash2_alias_wrong_draft"]["error"]
    assert error.startswith("ValueError: speculative method 'dflash2' needs a DFlash2 draft (a model that declares "
                            "the DFlash2 speculator), but ")
    assert error.endswith(" is DFlashDraftModel: use method 'dflash' for this checkpoint.")
