"""The H100 and H200 corpus cases as spec-check runs them on a GPU host, made on this CPU through the benchmark's
stand-in SM90 platform (vLLM's own CUDA platform answering device queries): the KV plan is made there, from the
layers built on the meta device, so every model class in the corpus is constructed by vLLM's own code.

The same verdicts as on a GPU-less host (tests/corpus/cases.json), no spec-check fault, and a KV plan for every
deployment that would start, whose full and MLA attention pages equal the ones the checkpoint's config gives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import sm90_stub
import spec_check_batch
from test_spec_check_corpus import CASES, argv

HARNESS = Path(__file__).parent / "scripts" / "spec_check_sm90.py"
CONFIGS = Path(__file__).parent / "corpus" / "configs"
GPU_HOST = {name: case for name, case in CASES.items() if case.get("gpu", "h100") in ("h100", "h200")}
KV_PLAN = "KV cache plan"
ORACLE_KINDS = {"FullAttentionSpec", "MLAAttentionSpec"}  # pages the config alone gives


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """{case: (exit code, report)}: one harness process per GPU, both at once."""
    work = tmp_path_factory.mktemp("gpu-host")
    sm90_stub.build_libcuda_stub(work)

    def harness(gpu, source: Path, out: Path) -> list[str]:  # the stub's GPU name: "H100", "H200"
        return [sys.executable, str(HARNESS), str(work / "libcuda.so.1"), gpu.name.split()[0], str(source), str(out)]

    ran = spec_check_batch.in_processes({name: argv(case) for name, case in GPU_HOST.items()}, work, harness)
    return {name: (code, output) for name, (code, output, _, _) in ran.items()}


@pytest.mark.parametrize("name", sorted(GPU_HOST))
def test_the_verdict_on_a_gpu_host_is_the_corpus_verdict(reports, name):
    """Never spec-check's own fault (exit 3) where vLLM builds the models for real, and the verdict vLLM's source
    implies, as on a host without the GPU."""
    code, output = reports[name]
    assert code == GPU_HOST[name]["code"], f"{name}: exit {code}: {output[-3000:]}"


def _page(config: dict, kind: str, tp: int, block_size: int) -> int:
    """Bytes of one block of one attention layer at 16 bits, from the checkpoint's own fields: MLA's latent and rope
    key (one copy per rank), else keys and values of this rank's KV heads (at least one when TP exceeds them)."""
    text = config.get("text_config", config)
    if kind == "MLAAttentionSpec":
        return block_size * (text["kv_lora_rank"] + text["qk_rope_head_dim"]) * 2
    heads = text.get("num_attention_heads") or text["n_head"]  # BLOOM's names
    head_dim = text.get("head_dim") or (text.get("hidden_size") or text["n_embed"]) // heads
    return 2 * block_size * max(1, text.get("num_key_value_heads", heads) // tp) * head_dim * 2


def test_the_kv_plan_prints_for_every_case_that_would_start(reports):
    """Every deployment with no failing check gets the planner's groups (at its length, 8k, 128k); a plan of full or
    MLA attention groups alone has the pages the checkpoint's config gives."""
    planned, checked = [], []
    for name, (code, output) in reports.items():
        checks = json.loads(output)["checks"]
        if any(c["status"] == "fail" for c in checks):
            continue
        plan = next(c for c in checks if c["check"] == KV_PLAN)  # the plan; warnings and the replayssm line follow
        if "pipeline parallelism" in plan["reason"]:  # each stage plans its own layers: not planned (docs)
            continue
        lengths = {request["length"] for request in plan["data"]["requests"]}
        assert 8192 in lengths or max(lengths) < 8192, (name, plan["reason"])  # 8k and 128k where max_model_len allows
        planned.append(name)
        groups = plan["data"]["requests"][0]["groups"]
        case = GPU_HOST[name]
        if "--kv-cache-dtype" in case["flags"] or {g["kind"] for g in groups} - ORACLE_KINDS:
            continue
        config = json.loads((CONFIGS / case["model"] / "config.json").read_text())
        flags = case["flags"]
        tp = int(flags[flags.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in flags else 1
        for group in groups:
            assert group["page_bytes"] == _page(config, group["kind"], tp, group["block_size"]), (name, group)
        checked.append(name)
    assert len(planned) >= 20 and len(checked) >= 8, (planned, checked)
