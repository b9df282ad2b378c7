"""The audit on the real pinned release, upstream and fork, asserted row by row where it matters."""

from __future__ import annotations

import json

import pytest

from fork_testing import run_forktool
from forktool.cli import main
from forktool.audit import run as audit_run
from forktool.audit.classify import is_generation, refused_architectures
from forktool.audit.report import counts
from forktool.sourcetree import SourceTree
from forktool.vocabulary import AuditStatus

AMD_KIMI = ("KimiLinearForCausalLM", "vllm.models.kimi_k3.amd.linear.KimiLinearForCausalLM")
CUDA_KIMI = ("KimiLinearForCausalLM", "vllm.models.kimi_k3.nvidia.model.KimiLinearForCausalLM")


@pytest.fixture(scope="module")
def audits(fork_audit):
    upstream, fork = list(fork_audit.upstream), list(fork_audit.fork_vs_upstream)
    index = lambda rows: {(r.arch, r.cls): r for r in rows}  # noqa: E731
    return index(upstream), index(fork), upstream, fork


def test_reported_classes_on_upstream_and_fork(audits):
    upstream, fork, _, _ = audits
    assert upstream[AMD_KIMI].status == "broken-undeclared"
    assert upstream[AMD_KIMI].holder == "model -> KimiLinearModel" and upstream[AMD_KIMI].passes_through
    assert (fork[AMD_KIMI].status, fork[AMD_KIMI].reason) == ("fixed by fork", "upstream: broken-undeclared")
    assert upstream[CUDA_KIMI].status == fork[CUDA_KIMI].status == "works"
    qwen3_next = ("Qwen3NextForCausalLM", "vllm.model_executor.models.qwen3_next.Qwen3NextForCausalLM")
    assert upstream[qwen3_next].status == "works"
    glm5 = ("Glm5NextForCausalLM", "vllm.models.glm5next.Glm5NextForCausalLM")
    assert any(k[0] == glm5[0] and r.status == "works" for k, r in upstream.items())


@pytest.mark.parametrize("arch, status", [
    ("Glm4ForCausalLM", "broken-undeclared"),
    ("DomynEdgeForCausalLM", "broken-undeclared"),
    ("Phi4MMForCausalLM", "broken-undeclared"),
    ("Qwen2VLForConditionalGeneration", "broken-undeclared"),
    ("Exaone4_5_ForConditionalGeneration", "broken-declared-not-implemented"),
    ("CohereCompassForConditionalGeneration", "broken-declared-not-implemented"),
    ("LlamaForCausalLM", "works"),
    ("LlavaForConditionalGeneration", "unresolvable statically"),
    # The mixin is inherited but the decoder's forward override never captures.
    ("MiMoForCausalLM", "broken-declared-not-implemented"),
    ("Granite4VisionForConditionalGeneration", "not applicable"),
    # Mamba-1 layers (MambaMixer) cannot roll rejected drafts back, pure or hybrid.
    ("MambaForCausalLM", "unsupported"),
    ("FalconMambaForCausalLM", "unsupported"),
    ("JambaForCausalLM", "unsupported"),
])
def test_known_upstream_rows(audits, arch, status):
    upstream = audits[0]
    assert {r.status for (a, _), r in upstream.items() if a == arch} == {status}


def test_a_decoder_capturing_only_through_a_helper_is_unresolvable(audits):
    """Mistral Large 4 on ROCm: MistralLarge4Model.forward hands every step to _stock_forward or the specialized
    decode, and only those capture; the audit finds the helper but cannot show every path reaches it."""
    upstream, fork, _, _ = audits
    amd = ("MistralLarge4ForCausalLM", "vllm.models.mistral.mistral_large4.amd.model.MistralLarge4ForCausalLM")
    nvidia = ("MistralLarge4ForCausalLM", "vllm.models.mistral.mistral_large4.nvidia.model.MistralLarge4ForCausalLM")
    for rows in (upstream, fork):
        assert (rows[amd].status, rows[amd].declared) == ("unresolvable statically", True)
        assert "(helper MistralLarge4Model._stock_forward)" in rows[amd].reason
        assert rows[nvidia].status == "works"  # its forward captures in its own layer loop


def test_counts_upstream_and_fork(audits):
    _, _, upstream, fork = audits
    before, after = counts(upstream)["generation"], counts(fork)["generation"]
    assert (before["broken-undeclared"], before["broken-declared-not-implemented"]) == (25, 4)
    assert (after["broken-undeclared"], after["broken-declared-not-implemented"]) == (0, 0)
    # Every row broken upstream works on the fork: the 25 undeclared and the 4 that declared without capture.
    assert (after["fixed by fork"], after["refused by fork"]) == (29, 0)
    assert after["unsupported"] == before["unsupported"] == 4
    assert sum(before.values()) == sum(after.values())


def test_refusal_table_is_empty_because_every_declared_not_implemented_row_captures_on_the_fork(audits, project):
    _, fork, upstream, _ = audits
    not_implemented = {(r.arch, r.cls) for r in upstream if r.status == "broken-declared-not-implemented"}
    assert {a for a, _ in not_implemented} == {"MiMoForCausalLM", "Exaone4_5_ForConditionalGeneration",
                                              "CohereCompassForConditionalGeneration",
                                              "Qwen4ExpForConditionalGeneration"}
    tree = SourceTree(lambda path: (project.root / path).read_text(), {"vllm/_fork/eagle3.py"})
    assert refused_architectures(tree) == set()
    assert {fork[key].status for key in not_implemented} == {"fixed by fork"}


def test_newly_capturing_classes_work_on_the_fork(audits):
    upstream, fork, _, _ = audits
    for arch, cls in (("Granite4VisionForConditionalGeneration", "granite4_vision"),
                      ("Exaone4ForCausalLM", "exaone4"), ("Qwen4ExpForCausalLM", "nvidia.model")):
        key = next(k for k in fork if k[0] == arch and cls in k[1])
        assert (upstream[key].status, fork[key].status) == ("not applicable", "works"), key


def test_cli_table_and_json(audits, fork_sources, monkeypatch, capsys):
    done = run_forktool("audit", "--json")
    data = json.loads(done.stdout)
    # Nothing on the fork is broken statically but the rows awaiting a declaration edit; the other broken row
    # is what the oracles found: DeepSeek-V4's aux-state drafters inherit its fp8_ds_mla KV cache, which no
    # attention backend takes for the draft's layers.
    statically_broken = (AuditStatus.UNDECLARED, AuditStatus.NOT_IMPLEMENTED)
    assert [data["counts"]["generation"].get(str(s), 0) for s in statically_broken] == [0, 0]
    oracle_found = {r["arch"]: r["reason"] for r in data["rows"] if r["status"] == AuditStatus.ORACLE_FAILED}
    # PhiMoE: since the oracles build its own class (its checkpoint named PhimoeForCausalLM before), the CPU
    # engine's aux state 2 is NaN; not explained yet (the CPU MoE path or the class).
    assert (done.returncode, sorted(oracle_found)) == (1, ["DeepseekV4ForCausalLM", "PhiMoEForCausalLM"]), \
        done.stdout[-2000:]
    assert "kv_cache_dtype=fp8_ds_mla" in oracle_found["DeepseekV4ForCausalLM"]
    # 29 rows the fork fixes statically: fixed by fork where an oracle built and passed them, else not proven.
    fixed = [r for r in data["rows"] if r["status"] == AuditStatus.FIXED
             or (r["status"] == AuditStatus.NOT_PROVEN and "(static reading: fixed by fork" in r["reason"])]
    assert len(fixed) == 29
    # The tables through the same CLI in this process, over the session's trees (the subprocess above has
    # already shown the CLI's own fetch and assembly; the classification is what takes a minute each time).
    monkeypatch.setattr(audit_run, "fork_and_upstream", lambda project, wheel: fork_sources[2:])
    monkeypatch.setattr(audit_run, "upstream_tree", lambda wheel: fork_sources.upstream)
    assert main(["audit"]) == 1
    table = capsys.readouterr().out
    assert table.strip().endswith("broken generation architectures: 2")
    assert "unsupported                      JambaForCausalLM" in table
    assert main(["audit", "--tree", "upstream"]) == 1
    table = capsys.readouterr().out
    assert "broken-undeclared                Glm4ForCausalLM" in table
    assert table.strip().endswith("broken generation architectures: 29")


def test_every_generation_row_left_without_capture_is_named_with_its_reason(audits):
    from forktool.audit.uncaptured import NOT_CAPTURED, STUB_REASON

    _, _, _, fork = audits
    uncaptured = {r.cls: r.reason for r in fork if is_generation(r) and r.status == "not applicable"}
    assert set(uncaptured) == set(NOT_CAPTURED), "name each (and only each) row left without capture"
    for cls, reason in uncaptured.items():
        assert reason.endswith(NOT_CAPTURED[cls]), cls
    # DeepSeek-V4's vision entry resolves (on this platform's re-export) to a stub whose __init__ raises.
    stub = [r for r in fork if r.cls == "vllm.models.deepseek_v4.vl_stub.DeepseekV4ForConditionalGeneration"]
    assert [(r.status, r.reason) for r in stub] == [("unsupported", STUB_REASON)]
