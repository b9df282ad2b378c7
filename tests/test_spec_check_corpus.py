"""spec-check on the real published configs of tests/corpus (SOURCES.md), all cases in one process per GPU.

Each case's expected verdict is written from vLLM 0.34.0's source (the "why" of tests/corpus/cases.json).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import spec_check_batch
from vllm._fork.vocabulary import CheckName

CORPUS = Path(__file__).parent / "corpus"
SCRIPTS = Path(__file__).parent / "scripts"


CASES = {name: case for name, case in json.loads((CORPUS / "cases.json").read_text()).items()
         if not name.startswith("_")}


def argv(case: dict) -> list[str]:
    """The command line of one case, with the corpus folders as paths."""
    spec = dict(case["spec"])
    if "model" in spec:
        spec["model"] = str(CORPUS / "configs" / spec["model"])
    return [str(CORPUS / "configs" / case["model"]), "--speculative-config", json.dumps(spec),
            "--gpu", case.get("gpu", "h100"), *case["flags"]]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    return spec_check_batch.in_processes({name: argv(case) for name, case in CASES.items()},
                                         tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_verdict(results, name):
    case = CASES[name]
    code, out, err, _ = results[name]
    assert code == case["code"], f"{name} ({case['why']}): exit {code}\n{out}\n{err[-2000:]}"
    report = json.loads(out)
    assert report["verdict"] == case.get("verdict", report["verdict"]), f"{name}: {report['verdict']}"
    statuses = {check["check"]: check["status"] for check in report["checks"]}
    assert set(statuses) <= set(CheckName), set(statuses) - set(CheckName)  # every check is named in one place
    for check, status in case["statuses"].items():
        assert statuses.get(check) == status, f"{name}: {check} is {statuses.get(check)}: {report['checks']}"
    text = " ".join(f"{c['reason']} {c['fix']}" for c in report["checks"])
    assert case.get("says", "") in text, text


def test_the_readme_check_table_names_corpus_cases_that_exist():
    """README's table of failure classes points at corpus cases by name: a renamed case must not leave it dangling."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme[readme.index("| class of failure |"):].split("\n\n")[0]
    named = set(re.findall(r"`([a-z0-9_]+)`", table))
    assert len(named) >= 10 and named <= set(CASES), named - set(CASES)
