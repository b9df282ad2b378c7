"""spec-check's combination rules and its warning verdict, on the installed fork (no engine config built)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from vllm._fork.spec_check import combinations
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, WARN, Finding, Refused, as_json, as_text, exit_code
from vllm._fork.vocabulary import Exit, Verdict


def test_a_warning_starts_but_says_acceptance_may_collapse():
    findings = [Finding("speculator", PASS, "ok"), combinations.default_aux_layers(32)]
    assert findings[1].status == WARN and "[2, 16, 29] of 32" in findings[1].reason
    assert exit_code(findings) == Exit.OK
    text = as_text(findings, "subject").splitlines()
    assert text[-1] == "verdict: will start, but acceptance may collapse"
    assert any(line.strip().startswith("fix: add eagle_aux_hidden_state_layer_ids") for line in text)
    report = json.loads(as_json(findings, "subject"))
    assert (report["verdict"], report["exit_code"]) == (str(Verdict.WILL_START_LOW_ACCEPTANCE), 0)


def test_a_failure_outranks_a_warning():
    findings = [combinations.default_aux_layers(32), Finding("weights fit", FAIL, "too big", "more GPUs")]
    assert json.loads(as_json(findings, "s"))["verdict"] == "will fail" and exit_code(findings) == Exit.FINDINGS
    assert as_text([Finding("x", INFO, "y")], "s").splitlines()[-1] == "verdict: will start"


def test_the_v1_refusal_is_named_after_its_rule():
    cause = ValueError("Model Runner V1 does not support: speculative decoding with pipeline parallelism (see "
                       "vllm-project/vllm#30436; Model Runner V2 supports it, VLLM_USE_V2_MODEL_RUNNER=1)")
    finding = combinations.refused(Refused("engine config", cause))
    assert (finding.check, finding.status) == (combinations.PP_V1, FAIL)
    assert "vllm#30436" in finding.reason and "VLLM_USE_V2_MODEL_RUNNER=1" in finding.fix
    assert combinations.refused(Refused("engine config", ValueError("max_num_seqs must be positive"))) is None


def test_pipeline_rule_reads_the_runner_the_config_picked():
    def config(pp: int, v2: bool):
        return SimpleNamespace(speculative_config=object(), use_v2_model_runner=v2,
                               parallel_config=SimpleNamespace(pipeline_parallel_size=pp))

    assert combinations.pipeline_on_v1(config(2, v2=False)).status == FAIL
    assert combinations.pipeline_on_v1(config(2, v2=True)) is None
    assert combinations.pipeline_on_v1(config(1, v2=False)) is None
