"""gpu-check: its pass/fail rules on the CPU; the whole run behind the `gpu` marker (H100/H200, `make gpu-check`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gpu_scenarios  # noqa: E402
from gpu_verdicts import TIE_NATS, greedy_verdict, packing_verdict  # noqa: E402

BASE = [[11, 12, 13, 14], [21, 22, 23]]
# Top-2 (token, logprob) per step of the base run: request 0 has a near-tie at step 2, request 1 wide margins.
TOP2 = [[[(11, -0.1), (40, -5.0)], [(12, -0.2), (41, -4.0)], [(13, -0.70), (42, -0.75)], [(14, -0.1), (43, -6.0)]],
        [[(21, -0.1), (50, -3.0)], [(22, -0.1), (51, -3.0)], [(23, -0.1), (52, -3.0)]]]


def test_identical_tokens_pass_and_are_all_compared():
    verdict = greedy_verdict(BASE, TOP2, BASE)
    assert verdict == {"compared": 7, "total": 7, "near_ties": [], "problems": []}


def test_a_near_tie_taken_the_other_way_ends_the_comparison_without_failing():
    verdict = greedy_verdict(BASE, TOP2, [[11, 12, 42, 99], [21, 22, 23]])
    assert verdict["problems"] == [] and verdict["compared"] == 5
    assert verdict["near_ties"] == ["request 0 token 2: near-tie (0.050 nats)"]


@pytest.mark.parametrize("spec, says", [
    ([[11, 12, 13, 14], [21, 51, 23]], "request 1 token 1: 51 instead of 22 (base margin 2.900 nats)"),
    ([[11, 12, 77, 14], [21, 22, 23]], "request 0 token 2: 77 instead of 13 (base margin 0.050 nats)"),
    ([[11, 12, 13], [21, 22, 23]], "request 0: 3 tokens with speculation, 4 without"),
])
def test_a_real_change_of_the_output_fails(spec, says):
    assert greedy_verdict(BASE, TOP2, spec)["problems"] == [says]


def test_the_tie_tolerance_is_the_documented_one():
    wide = [[[(1, 0.0), (2, -TIE_NATS - 0.01)]]]
    assert greedy_verdict([[1]], wide, [[2]])["problems"]
    assert not greedy_verdict([[1]], [[[(1, 0.0), (2, -TIE_NATS)]]], [[2]])["problems"]


def _run(block: int, draft: bool = True, prompts=(7000, 9800)) -> dict:
    groups = [{"kind": "MLAAttentionSpec", "draft": False, "block_size": 640, "window": None}]
    groups += [{"kind": "SlidingWindowSpec", "draft": True, "block_size": block, "window": 512}] if draft else []
    return {"kv_groups": groups, "prompt_lengths": list(prompts)}


def test_packing_is_read_from_the_engines_groups_on_and_off():
    assert packing_verdict(_run(1280), _run(640)) == []
    assert packing_verdict(_run(640), _run(640)) == ["draft group not packed: 640 tokens per block, 640 with "
                                                     "packing off"]
    assert packing_verdict(_run(640, draft=False), _run(640, draft=False))
    assert "do not span 3 packed draft blocks" in packing_verdict(_run(2304, prompts=(4000, 9000)), _run(1152))[0]


def test_unknown_scenario_is_bad_input():
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--only", "no-such"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "unknown scenario no-such" in done.stderr


@pytest.mark.gpu
def test_gpu_check_passes_on_an_h100_or_h200(tmp_path):
    """The real run: `make gpu-check` (one H100/H200, TP1, the fork wheel installed)."""
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)
    report = json.loads((tmp_path / "report.json").read_text())["scenarios"]
    assert set(report) == {s.name for s in gpu_scenarios.SCENARIOS}
    assert done.returncode == 0, done.stdout[-5000:]


def test_check_shares_base_runs_and_runs_the_packing_ab(monkeypatch, tmp_path):
    """The orchestration with the engine process replaced by canned results (the engine itself needs a GPU)."""
    import gpu_check

    calls = []

    def fake_engine(request, log, env=None):
        off = (env or {}).get("VLLM_FORK_DISABLE_KV_PACKING") == "1"
        speculative = request["engine"]["speculative_config"]
        calls.append((Path(request["engine"]["model"]).name, bool(speculative), request["prompts"], off))
        draft = [{"kind": "SlidingWindowSpec", "draft": True, "block_size": 640 if off else 1280, "window": 512}]
        return {"tokens": BASE, "top2": TOP2, "prompt_lengths": [7000, 9800], "tokens_per_second": 10.0,
                "kv_groups": draft if speculative else [], "backends": ["FLASHINFER_MLA_SPARSE_SM90"]}

    monkeypatch.setattr(gpu_check, "engine", fake_engine)
    bases = {}
    for name in ("glm5-text-mtp1", "glm5-text-mtp3", "glm5-text-dflash2-packed"):
        row = gpu_check.check(gpu_scenarios.BY_NAME[name], tmp_path, tmp_path, bases)
        assert row["ok"], (name, row["problems"])
    assert calls == [("glm5_text", False, "short", False), ("glm5_text", True, "short", False),
                     ("glm5_text_mtp3", True, "short", False),  # same target weights: the base run is shared
                     ("glm5_text", False, "long", False), ("glm5_text", True, "long", False),
                     ("glm5_text", True, "long", True)]  # the A/B run with packing off
    assert "glm5-text-dflash2-packed" in gpu_check.table({"glm5-text-dflash2-packed": row})


def test_engine_prompts_and_sharpening_are_the_same_in_every_run():
    import torch
    from gpu_engine import LONG, prompts, sharpen

    assert prompts("long") == prompts("long") and [len(p) for p in prompts("long")] == LONG
    assert all(5 <= t <= 250 for p in prompts("short") for t in p)  # inside the shipped tokenizer's vocabulary

    def model():
        net = torch.nn.Module()
        net.model, net.lm_head = torch.nn.Module(), torch.nn.Linear(8, 16, bias=False)
        net.model.norm = torch.nn.LayerNorm(8)
        torch.nn.init.uniform_(net.lm_head.weight, -1e-3, 1e-3)
        return net

    first, second = model(), model()
    weight = first.lm_head.weight
    assert sharpen(first) == ["model.norm.weight", "lm_head.weight"] == sharpen(second)
    assert first.lm_head.weight is weight  # in place: captured CUDA graphs read the same storage
    assert torch.equal(first.lm_head.weight, second.lm_head.weight) and weight.std() > 0.5
