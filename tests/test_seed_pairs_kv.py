"""The seed-pair capacity benchmark's RecoverSSM projection (benchmarks/seed_pairs_kv) against vLLM's own plan:
on Kimi-K3 + DSpark, which vLLM 0.34.0 lets take --use-replayssm, the projection must give the flag's plan; on
GLM-5.3-Flash + DFlash2 it may only drop the KDA states kept per draft position."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kv_pairs
import model_configs
import sm90_stub

GLM, KIMI = "GLM-5.3-Flash + DFlash2", "Kimi-K3 + DSpark"
WANTED = (GLM, GLM + kv_pairs.PROJECTED, KIMI + " --use-replayssm", KIMI + kv_pairs.PROJECTED)


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


def test_projection_on_glm_drops_only_the_states_per_draft_position(plans):
    """Same block bytes and KDA pages; each KDA group holds its 7 state blocks per draft position fewer."""
    plain, projected = (plans[name]["requests"][0] for name in (GLM, GLM + kv_pairs.PROJECTED))
    assert projected["block_bytes"] == plain["block_bytes"] and projected["num_blocks"] == plain["num_blocks"]
    for before, after in zip(plain["groups"], projected["groups"]):
        assert after["used_bytes_per_block"] == before["used_bytes_per_block"], before["kind"]
        assert after["blocks"] == before["blocks"] - before["speculative_blocks"], before["kind"]
    assert {g["speculative_blocks"] for g in plain["groups"] if g["kind"] == "MambaSpec"} == {7}
    assert projected["concurrency"] > plain["concurrency"]
