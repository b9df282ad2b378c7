"""Fuzz `vllm spec-check`'s input handling with hypothesis, in one process; prints a JSON verdict.

Usage: python spec_check_fuzz.py WORK_DIR EXAMPLES
Every generated input is wrong (not JSON, not an object, no method or model, paths that do not exist, files
that are not JSON objects), so every run must exit 2 with a one-line message in the --json report and
never a traceback. A failure prints hypothesis' minimal example.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm._fork.spec_check.cli import build_parser, run
from vllm._fork.spec_check.platform import install_if_unspecified, requested_gpu

WORK = Path(sys.argv[1])
SETTINGS = settings(max_examples=int(sys.argv[2]), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def _not_a_request(value) -> bool:
    """Parses as JSON but is not an object naming a method or a model."""
    return not isinstance(value, dict) or not (value.get("method") or value.get("model"))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                       max_size=3), max_leaves=6)
bad_spec = (st.text(max_size=40).filter(_not_json)
            | json_values.filter(_not_a_request).map(json.dumps))
# Any characters (NUL included) and names past the file system's 255-byte limit.
missing_paths = st.text(min_size=1, max_size=300).map(lambda name: str(WORK / "missing" / name.replace("/", "_")))
file_contents = st.text(max_size=60).filter(lambda t: _not_json(t) or not isinstance(json.loads(t), dict))


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(PARSER, argv + ["--json"])
    return code, out.getvalue(), err.getvalue()


def expect_bad_input(argv: list[str], fragment: str) -> None:
    code, out, err = call(argv)
    assert code == 2, (argv, code, out, err[-500:])
    assert "Traceback" not in out + err, err[-2000:]
    report = json.loads(out)
    assert report["verdict"] == "bad input" and fragment in report["error"], report
    assert "\n" not in report["error"], report


@SETTINGS
@given(spec=bad_spec)
def malformed_speculative_config(spec):
    expect_bad_input([str(WORK / "target"), "--speculative-config", spec], "speculative-config")


@SETTINGS
@given(path=missing_paths)
def missing_target(path):
    expect_bad_input([path, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'], "MODEL")


@SETTINGS
@given(path=missing_paths)
def missing_draft(path):
    spec = json.dumps({"method": "eagle3", "model": path, "num_speculative_tokens": 3})
    expect_bad_input([str(WORK / "target"), "--speculative-config", spec], "speculative model")


@SETTINGS
@given(content=file_contents)
def config_file_that_is_not_an_object(content):
    bad = WORK / "bad" / "config.json"
    bad.write_text(content, encoding="utf-8")
    expect_bad_input([str(bad.parent), "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'],
                     "MODEL")


if __name__ == "__main__":
    (WORK / "target").mkdir(parents=True, exist_ok=True)
    (WORK / "bad").mkdir(parents=True, exist_ok=True)
    (WORK / "target" / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    install_if_unspecified(requested_gpu([]))
    PARSER = build_parser()
    results = {}
    for fuzz in (malformed_speculative_config, missing_target, missing_draft, config_file_that_is_not_an_object):
        try:
            fuzz()
            results[fuzz.__name__] = "ok"
        except Exception:  # hypothesis re-raises the minimal failing example's assertion
            results[fuzz.__name__] = traceback.format_exc()[-3000:]
    print(json.dumps(results))
