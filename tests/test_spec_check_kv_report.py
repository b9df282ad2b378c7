"""spec-check's KV plan report as it runs on an H100 host, made on this CPU through the benchmark's stand-in SM90
platform (vLLM's own CUDA platform answering device queries): GLM-5.3-Flash + DFlash2 at TP8, Nemotron-H with n-gram.

The oracles are vLLM's, not ours: the benchmark's independent construction of the same plan (target attention
modules on the CPU, benchmarks/glm5_kv), vLLM's capacity formula, and vLLM's own plan with --use-replayssm for the
concurrency spec-check predicts for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kv_capacity
import model_configs
import sm90_stub

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "scripts" / "spec_check_sm90.py"
CORPUS = ROOT / "tests" / "corpus" / "configs"
NEMOTRON = CORPUS / "Nemotron-H-8B"
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})
KV_PLAN = "KV cache plan"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The benchmark's stock plan of GLM-5.3-Flash + DFlash2 (H100, bf16), and spec-check's reports, one process."""
    work = tmp_path_factory.mktemp("kvreport")
    model_configs.write(work / "models")
    sm90_stub.build_libcuda_stub(work)
    bench = kv_capacity.run_scenarios(work, "H100", "auto", {"stock": (True, "stock")})["stock"]
    assert bench["ok"], bench.get("error")
    target, draft = work / "models" / model_configs.TARGET_DIR, work / "models" / model_configs.DRAFT_DIR
    dflash2 = json.dumps({"method": "dflash", "model": str(draft), "num_speculative_tokens": 7})
    glm = [str(target), "--speculative-config", dflash2, "--tensor-parallel-size", "8", "--gpu", "h100",
           "--kv-cache-memory-bytes", str(bench["available_bytes"])]
    qwen3_next = [str(CORPUS / "Qwen3-Coder-Next"), "--speculative-config", json.dumps(
        {"method": "dflash", "model": str(CORPUS / "Qwen3-Coder-Next-DFlash"), "num_speculative_tokens": 15}),
        "--tensor-parallel-size", "8", "--gpu", "h100", "--max-model-len", "8192"]
    nemotron = [str(NEMOTRON), "--speculative-config", NGRAM, "--max-model-len", "8192", "--gpu", "h100",
                "--kv-cache-memory-bytes", str(8 << 30)]
    cases = {"glm": glm + ["--json"], "glm_8k": glm + ["--max-model-len", "8192"],
             "glm_target_8k": [str(target), "--tensor-parallel-size", "8", "--gpu", "h100", "--max-model-len", "8192",
                               "--kv-cache-memory-bytes", str(bench["available_bytes"])],
             "glm_8k_json": glm + ["--max-model-len", "8192", "--json"],
             "glm_8k_triton_prefill": glm + ["--max-model-len", "8192", "--kda-prefill-backend", "triton", "--json"],
             "glm_8k_replayssm_json": glm + ["--max-model-len", "8192", "--use-replayssm", "--json"],
             "qwen3_next_dflash": qwen3_next + ["--json"],
             "qwen3_next_replayssm": qwen3_next + ["--use-replayssm"],
             "nemotron": nemotron + ["--json"],
             "nemotron_replayssm": nemotron + ["--use-replayssm", "--mamba-backend", "flashinfer", "--json"]}
    # spec-check as a user runs it, the KV pools at their default (off); the draft packing only where opted in.
    reports = _reports(work, "default", cases, "off")
    reports |= _reports(work, "opted-in", {"glm_no_prefix_caching": glm + ["--no-enable-prefix-caching"]}, "on")
    return bench, reports


def _reports(work: Path, name: str, cases: dict, pools: str) -> dict:
    """spec-check's output per case, all cases in one harness process with VLLM_FORK_KV_POOLS=`pools`."""
    source, out = work / f"{name}.json", work / f"{name}.out.json"
    source.write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, str(HARNESS), str(work / "libcuda.so.1"), "H100", str(source), str(out)],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ, VLLM_FORK_KV_POOLS=pools))
    assert done.returncode == 0, done.stderr[-3000:]
    return {case: output for case, (code, output, seconds) in json.loads(out.read_text()).items()}


def _plan(report: str) -> dict:
    return next(c for c in json.loads(report)["checks"] if c["check"] == KV_PLAN and c["status"] == "pass")


def _warnings(report: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith(f"  [warn") and KV_PLAN in line]


def test_glm_groups_equal_the_benchmarks_independent_plan(runs):
    """Same blocks, block bytes, and per group layers and blocks at 8k as the benchmark's module-by-module plan."""
    bench, reports = runs
    plan = _plan(reports["glm"])["data"]
    at_8k = next(request for request in plan["requests"] if request["length"] == 8192)
    assert (at_8k["num_blocks"], at_8k["block_bytes"]) == (bench["num_blocks"], bench["block_stride"])
    assert at_8k["concurrency"] == pytest.approx(bench["concurrency"]["8192"], rel=1e-12)
    assert [(g["layers"], g["blocks"], g["block_size"]) for g in at_8k["groups"]] == \
        [(g["layers"], g["blocks"], g["block_size"]) for g in bench["groups_8k"]]


def test_bytes_per_request_are_vllms_concurrency(runs):
    """At every length the report states, the blocks times the bytes per block id give vLLM's own concurrency."""
    plan = _plan(runs[1]["glm"])["data"]
    assert [request["length"] for request in plan["requests"]] == [1048576, 8192, 131072]
    for request in plan["requests"]:
        pool = request["num_blocks"] * request["block_bytes"]
        assert pool / request["bytes_per_request"] == pytest.approx(request["concurrency"], rel=1e-12)
        assert sum(g["bytes"] for g in request["groups"]) == request["bytes_per_request"]


def test_an_8k_glm_request_warns_of_the_draft_and_of_padding(runs):
    """At 8k the DFlash2 window and the KDA states kept per draft position are most of a request; the table shows
    every group, and the verdict says capacity, not acceptance."""
    report = runs[1]["glm_8k"]
    table = [line for line in report.splitlines() if line.strip().split(" ")[0].isdigit()]
    assert len(table) == 7 and sum("incl. 7 per draft position" in line for line in table) == 4
    assert any("SlidingWindowSpec (draft)" in line for line in table)
    warned = _warnings(report)
    assert any("the draft costs" in line for line in warned) and any("is padding" in line for line in warned)
    # With the fork GLM-5.3-Flash's KDA takes RecoverSSM: the draft warning's fix names the flag.
    assert any("--use-replayssm" in line for line in report.splitlines() if "fix:" in line)


def test_a_full_attention_draft_group_is_the_drafts(runs):
    """Qwen3-Coder-Next + its DFlash draft: the draft's 8 full-attention layers form their own group, whose merged
    spec has lost the layers' is_draft flag; the report finds it by layer name, as vLLM's planner does."""
    request = _plan(runs[1]["qwen3_next_dflash"])["data"]["requests"][0]
    drafts = [g for g in request["groups"] if g["draft"]]
    assert [(g["kind"], g["layers"]) for g in drafts] == [("FullAttentionSpec", 8)]
    assert request["draft_share"] > 0 and request["speculative_state_share"] > 0


def test_the_target_alone_has_no_draft_warning(runs):
    report = runs[1]["glm_target_8k"]
    assert not any("the draft costs" in line for line in _warnings(report))
    assert "(draft)" not in report


def test_without_prefix_caching_the_packed_draft_group_shows_its_block(runs):
    assert "(block 640, draft 2560)" in runs[1]["glm_no_prefix_caching"]


def test_replayssm_on_a_target_that_cannot_take_it_names_the_flag(runs):
    """Qwen3-Next's Gated DeltaNet has neither ReplaySSM nor RecoverSSM for speculative decoding in 0.34.0."""
    report = runs[1]["qwen3_next_replayssm"]
    assert "--use-replayssm is not supported for architecture 'Qwen3NextForCausalLM'" in report
    assert report.rstrip().endswith("verdict: will fail")


def test_glm_replayssm_line_is_what_the_flag_gives(runs):
    """GLM-5.3-Flash + DFlash2 at 8k: the --use-replayssm line (RecoverSSM, Triton's Mamba backend) predicts the
    concurrency vLLM plans with the flag, and names the verify records the flag allocates outside the KV cache; with
    the flag no KDA group keeps a state per draft position."""
    reports = runs[1]
    line = next(c for c in json.loads(reports["glm_8k_json"])["checks"]
                if c["check"] == KV_PLAN and c["status"] == "info" and c["data"])
    assert line["data"]["flags"] == "--use-replayssm --mamba-backend triton"
    assert "verify records hold" in line["reason"] and line["data"]["verify_records"] > 0
    with_flag = _plan(reports["glm_8k_replayssm_json"])["data"]["requests"][0]
    assert with_flag["concurrency"] == line["data"]["concurrency"]
    assert all(g["speculative_blocks"] == 0 for g in with_flag["groups"])
    without = _plan(reports["glm_8k_json"])["data"]["requests"][0]
    assert with_flag["concurrency"] > 1.5 * without["concurrency"]


def test_replayssm_line_is_what_the_flags_give(runs):
    """Nemotron-H with n-gram (k=3) keeps 3 Mamba states per draft position: the draft warning fires, and the
    --use-replayssm line names the backend vLLM accepts for it and the concurrency a run with those flags plans."""
    reports = runs[1]
    checks = json.loads(reports["nemotron"])["checks"]
    assert any(c["check"] == KV_PLAN and c["status"] == "warn" and "the draft costs" in c["reason"] for c in checks)
    line = next(c for c in checks if c["check"] == KV_PLAN and c["status"] == "info" and c["data"])
    assert line["data"]["flags"] == "--use-replayssm --mamba-backend flashinfer"  # Mamba2 ReplaySSM needs it
    with_flags = _plan(reports["nemotron_replayssm"])["data"]["requests"][0]
    assert with_flags["concurrency"] == line["data"]["concurrency"]
    assert all(g["speculative_blocks"] == 0 for g in with_flags["groups"])
    assert _plan(reports["nemotron"])["data"]["requests"][0]["concurrency"] < with_flags["concurrency"]


def test_the_stand_in_h100_plans_glms_kda_with_flashkdas_prefill_checkpoint_block(runs):
    """On SM90, bf16, head dim 128 and a bounded gate, vLLM's own resolver picks FlashKDA for GLM's KDA prefill, whose
    spec keeps one prefill checkpoint block more per request (prefix caching's align mode: 2 + 7 drafts + 1): the
    H100 spec fields the KV plans here carry. Forcing the Triton prefill drops that block."""
    def kda_blocks(report: str) -> set[tuple[int, int]]:
        groups = next(r for r in _plan(report)["data"]["requests"] if r["length"] == 8192)["groups"]
        return {(g["blocks"], g["speculative_blocks"]) for g in groups if g["kind"] == "MambaSpec"}

    assert kda_blocks(runs[1]["glm_8k_json"]) == {(10, 7)}
    assert kda_blocks(runs[1]["glm_8k_triton_prefill"]) == {(9, 7)}
