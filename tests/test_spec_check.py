"""`vllm spec-check` on the reported deployments: each verdict, each failing check, and bad input exiting 2.

Every scenario runs the real command (`python -m vllm._fork.spec_check`, what `vllm spec-check` calls) in its
own process on this GPU-less host, where it installs its stand-in platform: configs only, no weights.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import spec_check_batch
import spec_check_scenarios
from vllm._fork.vocabulary import CheckName

SCRIPTS = Path(__file__).parent / "scripts"


NAMES = list(spec_check_scenarios.scenarios(Path("unused")))


def spec_check(*argv: str, json_out: bool = True, timeout: int = 300) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one real spec-check process."""
    command = [sys.executable, "-m", "vllm._fork.spec_check", *argv] + (["--json"] if json_out else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory) -> dict:
    return spec_check_scenarios.write(tmp_path_factory.mktemp("spec-check"))


@pytest.fixture(scope="module")
def results(scenarios, tmp_path_factory) -> dict:
    """Every scenario's run."""
    runs = spec_check_batch.in_processes({name: s.argv for name, s in scenarios.items()},
                                         tmp_path_factory.mktemp("batch"))
    return {name: (code, out, err) for name, (code, out, err, _) in runs.items()}


@pytest.mark.parametrize("name", NAMES)
def test_scenario_verdict(scenarios, results, name):
    expected = scenarios[name]
    code, out, err = results[name]
    assert "Traceback" not in out + err, err[-3000:]
    assert code == expected.code, f"{name}: exit {code}\n{out}\n{err[-2000:]}"
    report = json.loads(out)
    assert report["exit_code"] == code
    if code == 2:
        assert expected.says in report["error"], report["error"]
        return
    statuses = {check["check"]: check["status"] for check in report["checks"]}
    assert set(statuses) <= set(CheckName), set(statuses) - set(CheckName)  # every check is named in one place
    for check, status in expected.statuses.items():
        assert statuses.get(check) == status, f"{name}: {check} is {statuses.get(check)}: {report['checks']}"
    if code == 0:  # a warning keeps exit 0 and names itself in the verdict (a draft matrix no tensor reaches)
        warned = "warn" in statuses.values()
        assert report["verdict"] == ("will start, but acceptance may collapse" if warned else "will start"), name
    text = " ".join(f"{c['reason']} {c['fix']}" for c in report["checks"])
    assert expected.says in text, text


def test_fuzzed_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path):
    """hypothesis (in one process, tests/scripts/spec_check_fuzz.py): bad JSON, non-objects, missing fields,
    paths that do not exist or cannot exist, config files that are not JSON objects."""
    done = subprocess.run([sys.executable, str(SCRIPTS / "spec_check_fuzz.py"), str(tmp_path), "40"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == {"malformed_speculative_config", "missing_target", "missing_draft",
                            "config_file_that_is_not_an_object"}
    assert all(value == "ok" for value in results.values()), results


def test_vllm_console_script_has_the_subcommand_and_keeps_stdout_for_the_report(scenarios):
    """`vllm spec-check` (the CLI edit) on a host without a GPU, where upstream's `vllm` cannot build parsers; it
    runs before the CLI imports the other subcommands (serve's and the OpenAI server's modules are never loaded)."""
    vllm = Path(sys.executable).parent / "vllm"
    argv = scenarios["glm5_dflash2_alias"].argv
    text = subprocess.run([sys.executable, "-X", "importtime", str(vllm), "spec-check", *argv], capture_output=True,
                          text=True, timeout=300)
    # exit 1: a config-only draft folder cannot show its tensors (the checkpoint-contents check cannot tell)
    assert text.returncode == 1 and "Traceback" not in text.stderr, text.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in text.stderr.splitlines() if line.startswith("import time:")}
    assert "vllm.entrypoints.cli.main" in imported  # the console script's own module, so the list is real
    assert not imported & {"vllm.entrypoints.cli.serve", "vllm.entrypoints.openai.api_server"}, "other subcommands"
    lines = text.stdout.strip().splitlines()
    assert lines[0].startswith("spec-check ") and lines[-1] == "verdict: cannot tell"
    assert all(line.startswith(("spec-check ", "  [", "         fix:", "verdict:")) for line in lines), lines
    as_json = subprocess.run([str(vllm), "spec-check", *argv, "--json"], capture_output=True, text=True, timeout=300)
    assert json.loads(as_json.stdout)["verdict"] == "cannot tell"


def test_hub_ids_are_read_from_the_local_cache_only(scenarios, tmp_path):
    """`org/name` resolves to its cached snapshot (the hub library's cache layout), the draft's safetensors header
    included; nothing is downloaded."""
    cache = tmp_path / "hub"
    for repo_id, folder in (("Qwen/Qwen3-Next-Tiny", "qwen3_next"), ("z-lab/Qwen3-Next-Tiny-DFlash",
                                                                       "qwen3_next_dflash")):
        repo = cache / f"models--{repo_id.replace('/', '--')}"
        snapshot = repo / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True)
        source = Path(scenarios["qwen3_next_dflash"].argv[0]).parent / folder / "config.json"
        (snapshot / "config.json").write_bytes(source.read_bytes())
        if folder == "qwen3_next_dflash":  # the draft's header is read from the cache too (its tensors are checked)
            weights = source.parent.parent / "qwen3_next_dflash_weights" / "model.safetensors"
            (snapshot / "model.safetensors").write_bytes(weights.read_bytes())
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
    spec = json.dumps({"method": "dflash", "model": "z-lab/Qwen3-Next-Tiny-DFlash", "num_speculative_tokens": 4})
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "vllm._fork.spec_check", "Qwen/Qwen3-Next-Tiny",
                           "--speculative-config", spec, "--json"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    statuses = {check["check"]: check["status"] for check in json.loads(done.stdout)["checks"]}
    assert statuses["draft tensors"] == "info", statuses  # every tensor of the cached header loads
    missing = subprocess.run([sys.executable, "-m", "vllm._fork.spec_check", "Qwen/Not-Cached",
                              "--speculative-config", spec, "--json"], capture_output=True, text=True,
                             timeout=300, env={**os.environ, **env})
    assert missing.returncode == 2 and "never downloads" in json.loads(missing.stdout)["error"]


def test_importing_the_scenario_configs_leaves_the_environment_alone():
    """The probe's CPU stand-ins (VLLM_TARGET_DEVICE=cpu, V2 runner) once leaked into every later engine run."""
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); before = dict(os.environ); "
            "import spec_check_scenarios, glm5_spec_probe; sys.exit(dict(os.environ) != before)")
    clean = {k: v for k, v in os.environ.items() if k not in ("VLLM_TARGET_DEVICE", "VLLM_USE_V2_MODEL_RUNNER")}
    assert subprocess.run([sys.executable, "-c", code, str(SCRIPTS)], env=clean, timeout=120).returncode == 0


INJECT = """
import contextlib, io, json, sys
from vllm._fork.spec_check import checks, cli
def broken(*args, **kwargs):
    raise RuntimeError("injected fault")
checks.speculator = broken  # a bug in one check, or a vLLM interface it reads that moved
argv = json.loads(sys.argv[1])
runs = {}
for extra in (["--json"], ["--debug"]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv + extra)
    runs[extra[0]] = [code, out.getvalue(), err.getvalue()]
print(json.dumps(runs))
"""


def test_own_fault_exits_3_naming_the_check_without_findings_or_advice(scenarios):
    """A fault injected into one check is spec-check's failure, never a verdict."""
    argv = scenarios["serve_spec_flags"].argv
    done = subprocess.run([sys.executable, "-c", INJECT, json.dumps(argv)], capture_output=True, text=True,
                          timeout=600)
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    code, out, err = runs["--json"]
    report = json.loads(out)
    assert code == 3 and report["exit_code"] == 3 and report["verdict"] == "spec-check failed", out
    assert report["check"] == "speculator" and "injected fault" in report["error"] and "checks" not in report
    assert "Traceback" not in err
    code, out, err = runs["--debug"]
    assert code == 3 and len(out.strip().splitlines()) == 1, out
    assert out.startswith("spec-check: internal error in check 'speculator'") and "fix:" not in out
    assert "Traceback" in err and "injected fault" in err


def test_vllm_spec_check_argument_errors_are_bad_input(scenarios):
    """Under `vllm spec-check` a value that does not parse, or an unknown flag, exits 2 with one
    line (JSON under --json), as `python -m vllm._fork.spec_check` does."""
    vllm = Path(sys.executable).parent / "vllm"
    model = scenarios["serve_spec_flags"].argv[0]
    for argv in (["--speculative-config", "{not json"], ["--speculative-config", "{}", "--no-such-flag"]):
        done = subprocess.run([str(vllm), "spec-check", model, *argv, "--json"], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 2, done.stdout + done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["verdict"] == "bad input" and "<function" not in report["error"], report


def test_a_draft_tensor_wider_than_its_parameter_fails_with_the_loaders_own_message(tmp_path):
    """z-lab's Qwen3-8B DFlash draft with `fc` stored for four target layers while its config names five: the class
    builds fc over 5 x 4096 inputs and its weight loader refuses the 4 x 4096-wide tensor."""
    sys.path.insert(0, str(Path(__file__).parent / "corpus"))
    import assemble

    corpus = Path(__file__).parent / "corpus" / "configs"
    draft = tmp_path / "Qwen3-8B-DFlash-b16"
    draft.mkdir()
    config = json.loads((corpus / draft.name / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps(config))
    tensors = assemble.dflash_tensors(config)
    tensors["fc.weight"] = [config["hidden_size"], 4 * config["hidden_size"]]
    assemble.header_only(draft / "model.safetensors", tensors, "BF16")
    spec = {"method": "dflash", "model": str(draft), "num_speculative_tokens": 15}
    code, out, err = spec_check(str(corpus / "Qwen3-8B"), "--speculative-config", json.dumps(spec))
    checks = {check["check"]: check for check in json.loads(out)["checks"]}
    assert code == 1, err[-2000:]
    assert checks["draft tensors"]["status"] == "fail", checks["draft tensors"]
    assert "fc.weight" in checks["draft tensors"]["reason"] and "[4096, 16384]" in checks["draft tensors"]["reason"]
