"""The seed-pair capacity benchmark (benchmarks/seed_pairs_kv) with --use-replayssm: on Kimi-K3 + DSpark, which vLLM
0.34.0 lets take the flag, the projection the benchmark uses for Qwen3-Next must give the flag's plan; on
GLM-5.3-Flash + DFlash2, which takes it with the fork's RecoverSSM wiring, the flag drops exactly the KDA states kept
per draft position, and the verify records it allocates come out of the KV budget."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kv_pairs
import model_configs
import sm90_stub

GLM, KIMI = "GLM-5.3-Flash + DFlash2", "Kimi-K3 + DSpark"
GLM_REPLAY = GLM + kv_pairs.REPLAY
WANTED = (GLM, GLM_REPLAY, KIMI + kv_pairs.REPLAY, KIMI + kv_pairs.PROJECTED)


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("pairs")
    model_configs.write(work / "models")
    sm90_stub.build_libcuda_stub(work)
    everything = kv_pairs.scenarios(work / "models", "H100", ["auto"], ["fork"])
    chosen = {name: scenario for name, scenario in everything.items() if name.split("|")[0] in WANTED}
    (work / "H100.scenarios.json").write_text(json.dumps(chosen))
    done = subprocess.run([sys.executable, str(kv_pairs.HERE / "plan_pairs.py"), str(work / "libcuda.so.1"), "H100",
                           str(work / "H100.scenarios.json"), str(work / "out.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    results = {name.split("|")[0]: result for name, result in json.loads((work / "out.json").read_text()).items()}
    assert all(result["ok"] for result in results.values()), {k: v.get("error") for k, v in results.items()}
    return results


def test_projection_is_the_flags_own_plan_where_vllm_has_it(plans):
    assert plans[KIMI + kv_pairs.PROJECTED] == plans[KIMI + " --use-replayssm"]
    groups = plans[KIMI + " --use-replayssm"]["requests"][0]["groups"]
    assert all(g["speculative_blocks"] == 0 for g in groups)


def test_replayssm_on_glm_drops_only_the_states_per_draft_position(plans):
    """At 8k: same block bytes and KDA pages; each KDA group holds its 7 state blocks per draft position fewer."""
    plain, replay = (next(r for r in plans[name]["requests"] if r["length"] == 8192) for name in (GLM, GLM_REPLAY))
    assert replay["block_bytes"] == plain["block_bytes"]
    for before, after in zip(plain["groups"], replay["groups"]):
        assert after["used_bytes_per_block"] == before["used_bytes_per_block"], before["kind"]
        assert after["blocks"] == before["blocks"] - before["speculative_blocks"], before["kind"]
    assert {g["speculative_blocks"] for g in plain["groups"] if g["kind"] == "MambaSpec"} == {7}
    assert replay["concurrency"] > 1.5 * plain["concurrency"]


def test_glm_verify_records_are_what_each_kda_layer_allocates(plans):
    """vllm serve's 1024 sequences x 34 KDA layers x 8 heads per rank x a window of 8 x (an fp32 correction of 128
    and a bf16 key and gate of 256), as KDARecoverSSMRecords lays them out; none without the flag."""
    assert plans[GLM]["verify_records"] == 0
    result = plans[GLM_REPLAY]
    assert result["max_num_seqs"] == 1024
    assert result["verify_records"] == 1024 * 34 * 8 * 8 * (128 * 4 + 256 * 2)
