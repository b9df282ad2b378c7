"""spec-check's combination rules and its warning verdict, on the installed fork (no engine config built)."""

from __future__ import annotations

import json

from vllm._fork.spec_check import combinations
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, WARN, Finding, as_json, as_text, exit_code
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
