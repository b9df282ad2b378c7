"""gpu-check: its pass/fail rules on the CPU; the whole run behind the `gpu` marker (H100/H200, `make gpu-check`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpu_scenarios
import gpu_constructed
from gpu_verdicts import (TIE_NATS, constructed_problems, greedy_verdict, packing_verdict,
                          prefix_cache_problems, speculation_problems)

SCRIPTS = Path(__file__).resolve().parent / "scripts"


BASE = [[11, 12, 13, 14], [21, 22, 23]]
# Top-k (token, logprob) per step of the base run: request 0 has a near-tie at step 2, request 1 wide margins.
TOP5 = [[[(11, -0.1), (40, -5.0)], [(12, -0.2), (41, -4.0)], [(13, -0.70), (42, -0.75)], [(14, -0.1), (43, -6.0)]],
        [[(21, -0.1), (50, -3.0)], [(22, -0.1), (51, -3.0)], [(23, -0.1), (52, -3.0)]]]


def test_identical_tokens_pass_and_are_all_compared():
    verdict = greedy_verdict(BASE, TOP5, BASE)
    assert verdict == {"compared": 7, "total": 7, "near_ties": [], "problems": []}


def test_a_near_tie_taken_the_other_way_ends_the_comparison_without_failing():
    verdict = greedy_verdict(BASE, TOP5, [[11, 12, 42, 99], [21, 22, 23]])
    assert verdict["problems"] == [] and verdict["compared"] == 5
    assert verdict["near_ties"] == ["request 0 token 2: near-tie (0.050 nats)"]


@pytest.mark.parametrize("spec, says", [
    ([[11, 12, 13, 14], [21, 51, 23]], "request 1 token 1: 51 instead of 22 (base margin 2.900 nats)"),
    ([[11, 12, 77, 14], [21, 22, 23]], "request 0 token 2: 77 instead of 13 (base margin 0.050 nats)"),
    ([[11, 12, 13], [21, 22, 23]], "request 0: 3 tokens with speculation, 4 without"),
])
def test_a_real_change_of_the_output_fails(spec, says):
    assert greedy_verdict(BASE, TOP5, spec)["problems"] == [says]


def test_the_tie_tolerance_is_the_documented_one():
    wide = [[[(1, 0.0), (2, -TIE_NATS - 0.01)]]]
    assert greedy_verdict([[1]], wide, [[2]])["problems"]
    assert not greedy_verdict([[1]], [[[(1, 0.0), (2, -TIE_NATS)]]], [[2]])["problems"]


def _run(block: int, draft: bool = True, prompts=(7000, 9800)) -> dict:
    groups = [{"kind": "MLAAttentionSpec", "draft": False, "block_size": 640, "window": None}]
    groups += [{"kind": "SlidingWindowSpec", "draft": True, "block_size": block, "window": 512}] if draft else []
    return {"kv_groups": groups, "prompts": [[5] * n for n in prompts]}


def test_packing_is_read_from_the_engines_groups_on_and_off():
    assert packing_verdict(_run(1280), _run(640)) == []
    assert packing_verdict(_run(640), _run(640)) == ["draft group not packed: 640 tokens per block, 640 with "
                                                     "packing off"]
    assert packing_verdict(_run(640, draft=False), _run(640, draft=False))
    assert "do not span 3 packed draft blocks" in packing_verdict(_run(2304, prompts=(4000, 9000)), _run(1152))[0]


def test_a_three_way_tie_taken_by_its_third_token_passes():
    tops = [[[(7, -1.00), (8, -1.20), (9, -1.40), (10, -6.0), (11, -7.0)]]]
    assert greedy_verdict([[7]], tops, [[9]])["near_ties"] == ["request 0 token 0: near-tie (0.400 nats)"]
    assert greedy_verdict([[7]], tops, [[10]])["problems"]  # inside the top-k, outside the tie


def test_drafts_never_accepted_fail_the_floor_and_none_proposed_fail_everywhere():
    never = {"speculator": "EagleSpeculator", "drafts": 200, "draft_tokens": 600, "accepted": 0}
    assert speculation_problems(never, "EagleSpeculator", 3, floor=True) == [
        "0.00 tokens accepted per draft, floor 2.70 (k = 3, target and drafter agree by construction)"]
    silent = {"speculator": "EagleSpeculator", "drafts": 0, "accepted": 0}
    assert speculation_problems(silent, "EagleSpeculator") == ["no drafts were proposed (speculation silently off)"]
    wrong = dict(never, speculator="DraftModelProposer", accepted=600)
    assert speculation_problems(wrong, "EagleSpeculator", 3, floor=True) == [
        "drafted by DraftModelProposer, not EagleSpeculator"]


def test_prefix_caching_may_not_lose_acceptance():
    off = {"drafts": 100, "draft_tokens": 300, "accepted": 297}
    assert prefix_cache_problems(dict(off, prefix_cache_hits=640), off) == []
    collapsed = {"drafts": 100, "draft_tokens": 300, "accepted": 120, "prefix_cache_hits": 640}
    assert prefix_cache_problems(collapsed, off) == ["acceptance 0.400 with prefix caching on, 0.990 off "
                                                     "(margin 0.05)"]
    assert "no prefix-cache hit" in prefix_cache_problems(dict(off, prefix_cache_hits=0), off)[0]


def test_constructed_tokens_must_walk_the_cycle_exactly():
    prompt = gpu_constructed.prompts([12])[0]
    walk = gpu_constructed.continuation(prompt, 6)
    assert len(set(walk)) == 6 and all(t in gpu_constructed.TOKENS for t in walk)
    assert constructed_problems({"prompts": [prompt], "tokens": [walk]}, gpu_constructed.continuation) == []
    off = walk[:3] + [prompt[-1]] + walk[4:]
    assert constructed_problems({"prompts": [prompt], "tokens": [off]}, gpu_constructed.continuation) == [
        f"request 0 token 3: {prompt[-1]} instead of {walk[3]}"]


def test_the_cycle_visits_every_token_once():
    seen, token = [], gpu_constructed.TOKENS[0]
    for _ in gpu_constructed.TOKENS:
        seen.append(token)
        token = gpu_constructed.PI[token]
    assert token == gpu_constructed.TOKENS[0] and sorted(seen) == gpu_constructed.TOKENS


def _bf16_runs(fp32_head: bool, requests: int = 64, steps: int = 96, hidden: int = 512, vocab: int = 512):
    """Two runs of the same greedy decode whose bf16 hidden states differ by rounding (other kernels, other
    batch shapes), each step's logits from the sharpened lm_head: (base tokens, base top-5, other tokens)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    head = torch.randn(vocab, hidden, generator=gen).bfloat16()
    hidden_states = torch.randn(requests, steps, hidden, generator=gen)
    # The second run's hidden state: the same value computed in another order, i.e. a few ulps of bf16 apart.
    other = (hidden_states * (1 + torch.randn(hidden_states.shape, generator=gen) * 2.0 ** -8)).bfloat16()
    runs = []
    for states in (hidden_states.bfloat16(), other):
        logits = states.float() @ head.float().T if fp32_head else (states @ head.T).float()
        runs.append(torch.log_softmax(logits, -1))
    base, spec = runs
    top = base.topk(5, dim=-1)
    topk = [[list(zip(i.tolist(), v.tolist())) for i, v in zip(ri, rv)] for ri, rv in zip(top.indices, top.values)]
    return base.argmax(-1).tolist(), topk, spec.argmax(-1).tolist()


def test_simulated_bf16_noise_passes_with_the_fp32_head():
    base, topk, spec = _bf16_runs(fp32_head=True)
    verdict = greedy_verdict(base, topk, spec)
    assert verdict["problems"] == [] and verdict["compared"] > 0.6 * verdict["total"]


def test_bf16_logits_would_flake_where_the_fp32_head_does_not():
    """The old run's logits in bf16 (0.5-nat steps at the top logit): the same noise then trips the rule."""
    base, topk, spec = _bf16_runs(fp32_head=False)
    assert greedy_verdict(base, topk, spec)["problems"]


def test_a_wrong_token_outside_a_tie_fails_even_among_noise():
    base, topk, spec = _bf16_runs(fp32_head=True)
    wide = next((r, s) for r, req in enumerate(topk) for s, step in enumerate(req) if step[0][1] - step[1][1] > 3)
    spec[wide[0]] = spec[wide[0]][:wide[1]] + [topk[wide[0]][wide[1]][1][0]] + spec[wide[0]][wide[1] + 1:]
    spec[wide[0]] = base[wide[0]][:wide[1]] + spec[wide[0]][wide[1]:]
    assert [p for p in greedy_verdict(base, topk, spec)["problems"] if p.startswith(f"request {wide[0]} ")]


def test_unknown_scenario_is_bad_input(capsys):
    import gpu_check  # in this process: a second interpreter would import torch and vLLM again (≈ 10 s)

    assert gpu_check.main(["--only", "no-such"]) == 2
    assert "gpu-check: unknown scenario no-such; known: glm5-text-mtp1" in capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_check_passes_on_an_h100_or_h200(tmp_path):
    """The real run: `make gpu-check` (one H100/H200, TP1, the fork wheel installed)."""
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)
    report = json.loads((tmp_path / "report.json").read_text())["scenarios"]
    assert set(report) == {s.name for s in gpu_scenarios.SCENARIOS}
    assert done.returncode == 0, done.stdout[-5000:]


def _canned(job) -> dict:
    """What an engine would answer: base tokens for random scenarios, the walked cycle for constructed ones."""
    request, engine = job.request, job.request["engine"]
    off = request.get("env", {}).get("VLLM_FORK_DISABLE_KV_PACKING") == "1"
    speculative = engine["speculative_config"]
    draft = [{"kind": "SlidingWindowSpec", "draft": True, "block_size": 640 if off else 1280, "window": 512}]
    result = {"ok": True, "tokens": BASE, "topk": TOP5, "prompts": [[5] * 7000, [5] * 9800],
              "kv_groups": draft if speculative else [], "log_text": "Using FLASHINFER_MLA_SPARSE_SM90 attention backend",
              "sharpened": {"checksum": 1.0}, "process_seconds": 1.0}
    if speculative:
        scenario = next(s for s in gpu_scenarios.SCENARIOS if job.name.startswith(s.name + "-"))
        k = speculative["num_speculative_tokens"]
        result |= {"speculator": scenario.speculator, "drafts": 10, "draft_tokens": 10 * k, "accepted": 10 * k}
    if engine.get("load_format") == "auto" and "constructed" in engine["model"]:
        prompts = request["prompts"] + request.get("then", [])
        result |= {"prompts": prompts, "tokens": [gpu_constructed.continuation(p, 8) for p in prompts],
                   "prefix_cache_hits": 256 if engine["enable_prefix_caching"] else 0}
    return result


def test_check_shares_base_runs_runs_the_ab_runs_and_reports_after_each_scenario(monkeypatch, tmp_path):
    """The orchestration with the engine processes replaced by canned results (the engines need a GPU)."""
    import gpu_check
    import gpu_pool

    started, reports = [], []

    def fake_pool(jobs, parallel, cache, done, solo_first=False, deadline=None):
        for job in jobs:
            started.append((job.name, job.request.get("env", {}), job.request["engine"].get("enable_prefix_caching")))
            job.result = _canned(job)
            done(job)
            reports.append(json.loads((tmp_path / "report.json").read_text())["scenarios"].keys()
                           if (tmp_path / "report.json").exists() else [])

    monkeypatch.setattr(gpu_pool, "run", fake_pool)
    monkeypatch.setattr(gpu_scenarios, "write", lambda root: root)
    names = ["glm5-text-mtp1", "glm5-text-mtp3", "glm5-text-dflash2-packed", "constructed-eagle3",
             "constructed-eagle3-prefix-cache", "constructed-mtp", "constructed-dflash2"]
    code = gpu_check.main([arg for n in names for arg in ("--only", n)] + ["--out", str(tmp_path)])
    assert code == 0, (tmp_path / "table.txt").read_text()
    off = {"VLLM_FORK_DISABLE_KV_PACKING": "1"}
    assert started == [  # the warm-up (the mtp scenarios' shared base run), constructed engines, the rest
        ("base-glm5_text-auto-short", {}, None),
        ("constructed-eagle3-spec", {}, False), ("constructed-eagle3-prefix-cache-prefix-off", {}, False),
        ("constructed-eagle3-prefix-cache-prefix-on", {}, True), ("constructed-mtp-spec", {}, False),
        ("constructed-dflash2-spec", {}, False), ("glm5-text-mtp1-spec", {}, None), ("glm5-text-mtp3-spec", {}, None),
        ("base-glm5_text-auto-long", {}, False), ("glm5-text-dflash2-packed-spec", {}, False),
        ("glm5-text-dflash2-packed-packing-off", off, False)]
    assert [len(r) for r in reports] == [0, 1, 1, 2, 3, 4, 5, 6, 6, 6, 7]  # written as each scenario completes
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["engines"]) == len(started) and report["budget_seconds"] == 600
    assert "constructed-eagle3-prefix-cache" in (tmp_path / "table.txt").read_text()


def test_the_prefix_scenario_sends_the_prefix_first_then_prompts_extending_it():
    """What lets the cache hit: the prefix finished first, then prompts that extend it, cache off and on."""
    import gpu_check

    roles = gpu_check.jobs_for(gpu_scenarios.BY_NAME["constructed-eagle3-prefix-cache"], Path("/w"), Path("/l"), {})
    for role, caching in (("spec", False), ("prefix_on", True)):
        request = roles[role].request
        (first,), rest = request["prompts"], request["then"]
        assert len(first) == gpu_check.PREFIX and request["engine"]["enable_prefix_caching"] is caching
        assert len(rest) == 7 and all(p[:len(first)] == first and len(p) > len(first) for p in rest)
    mtp = gpu_check.jobs_for(gpu_scenarios.BY_NAME["constructed-mtp"], Path("/w"), Path("/l"), {})["spec"]
    assert mtp.request["engine"]["model"] == "/w/constructed_mimo" and "model" not in mtp.request["engine"][
        "speculative_config"]  # MTP drafts with the target checkpoint's own layer


def test_a_silent_drafter_fails_its_scenario(monkeypatch, tmp_path):
    import gpu_check
    import gpu_pool

    def fake_pool(jobs, parallel, cache, done, solo_first=False, deadline=None):
        for job in jobs:
            job.result = _canned(job) | ({"drafts": 0} if job.name.endswith("-spec") else {})
            done(job)

    monkeypatch.setattr(gpu_pool, "run", fake_pool)
    monkeypatch.setattr(gpu_scenarios, "write", lambda root: root)
    assert gpu_check.main(["--only", "glm5-text-mtp1", "--out", str(tmp_path)]) == 1
    row = json.loads((tmp_path / "report.json").read_text())["scenarios"]["glm5-text-mtp1"]
    assert row["problems"] == ["spec: no drafts were proposed (speculation silently off)"]


def test_a_failed_engine_keeps_its_traceback_and_versions(monkeypatch, tmp_path):
    import gpu_check
    import gpu_pool

    def fake_pool(jobs, parallel, cache, done, solo_first=False, deadline=None):
        for job in jobs:
            job.result = {"ok": False, "error": "RuntimeError: boom", "traceback": "Traceback ... boom",
                          "versions": {"vllm": "0.33.0+fork"}}
            done(job)

    monkeypatch.setattr(gpu_pool, "run", fake_pool)
    monkeypatch.setattr(gpu_scenarios, "write", lambda root: root)
    assert gpu_check.main(["--only", "glm4-eagle3", "--out", str(tmp_path)]) == 1
    row = json.loads((tmp_path / "report.json").read_text())["scenarios"]["glm4-eagle3"]
    assert row["problems"][0] == "base: RuntimeError: boom"
    assert row["runs"]["spec"]["traceback"] == "Traceback ... boom" and row["runs"]["spec"]["versions"]


def test_engine_prompts_and_sharpening_are_the_same_in_every_run():
    import torch
    from gpu_engine import LONG, prompts, sharpen

    assert prompts("long") == prompts("long") and [len(p) for p in prompts("long")] == LONG
    assert all(5 <= t <= 250 for p in prompts("short") for t in p)  # inside the shipped tokenizer's vocabulary

    class GemmaStyle(torch.nn.Module):  # x * (1 + w): a weight of 0 is a gain of 1
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(8))

        def forward(self, x):
            return x * (1 + self.weight)

    def model(norm):
        net = torch.nn.Module()
        net.model, net.lm_head = torch.nn.Module(), torch.nn.Linear(8, 16, bias=False)
        net.model.norm = norm
        torch.nn.init.uniform_(net.lm_head.weight, -1e-3, 1e-3)
        return net

    rms = torch.nn.RMSNorm(8)
    with torch.no_grad():
        rms.weight.uniform_(-1e-3, 1e-3)  # dummy weights: the gain is tiny
    first, second, gemma = model(rms), model(rms), model(GemmaStyle())
    norm_before = rms.weight.clone()
    weight = first.lm_head.weight
    done = sharpen(first)
    assert done["lm_head"] == "lm_head.weight" and done["norm"] == "model.norm"
    assert first.lm_head.weight is weight  # in place: captured CUDA graphs read the same storage
    assert torch.equal(rms.weight, norm_before)  # the final norm is not touched
    assert sharpen(second)["checksum"] == done["checksum"]
    assert torch.equal(first.lm_head.weight, second.lm_head.weight)
    # Logits through the norm have a spread of about sqrt(hidden), whatever the norm's kind.
    sharpen(gemma)
    for net in (first, gemma):
        logits = net.lm_head(net.model.norm(torch.randn(256, 8)))
        assert 1.5 < float(logits.std()) < 5, float(logits.std())


def test_sharpen_refuses_a_model_it_cannot_reach():
    import torch
    from gpu_engine import sharpen

    with pytest.raises(RuntimeError, match="no final norm"):
        sharpen(torch.nn.Linear(2, 2))


def test_where_the_pools_are_not_ported_the_ab_checks_that_opting_in_keeps_stocks_plan():
    """gpu-check's pools A/B on a vLLM release the pools are not ported to: both arms stock's plan, the warning line,
    no carving line, the same hits; a carved config, a missing warning or other hits fail it."""
    import gpu_check

    plain = {"type": "KVCacheConfig", "groups": [{"slots": 1, "kind": "MambaSpec", "draft": False}],
             "num_blocks": 6200, "kv_cache_max_concurrency": 60.78, "kv_cache_size_tokens": 1991780}
    on = {"kv_config": plain, "log_text": f"WARNING VLLM_FORK_KV_POOLS=on: {gpu_check.GATED_LOG} to vLLM 0.35.0+fork",
          "prefix_cache_hits": 17920, "prefix_cache_queries": 26460}
    off = {"kv_config": dict(plain), "log_text": "", "prefix_cache_hits": 17920, "prefix_cache_queries": 26460}
    assert gpu_check.pools_gated_verdict(on, off) == []
    carved = dict(plain, type="PooledKVCacheConfig", groups=[{"slots": 2, "kind": "MambaSpec", "draft": False}],
                  kv_cache_size_tokens=2220049)
    assert len(gpu_check.pools_gated_verdict(dict(on, kv_config=carved), off)) == 2
    assert gpu_check.pools_gated_verdict(dict(on, log_text=""), off) == \
        [f"pools on: no log line '... {gpu_check.GATED_LOG} ...'"]
    assert gpu_check.pools_gated_verdict(dict(on, prefix_cache_hits=0), off)


def test_the_kv_pools_kernel_comparison_is_a_scenario_of_its_own(monkeypatch):
    """kv_pools_kernel_check.py as gpu-check runs it, here on the CPU under Triton's interpreter: one line per plan."""
    import gpu_check

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = gpu_check.kernel_check(device="cpu", dtype="float32", backends=("TRITON_ATTN",))
    assert result["ok"], result["problems"]
    assert len(result["lines"]) == 3 and all(line.startswith("TRITON_ATTN: ") and
                                             "carved slot = stock block, bitwise" in line for line in result["lines"])


def test_a_kernel_comparison_that_cannot_run_fails_its_scenario_with_the_reason(tmp_path, capsys):
    """On a host without CUDA (this one) the bf16 comparison cannot start: a failed scenario saying why, exit 1."""
    import gpu_check

    assert gpu_check.main(["--only", gpu_check.KERNELS, "--out", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "report.json").read_text())["scenarios"][gpu_check.KERNELS]
    assert report["ok"] is False and report["problems"][0].startswith("kv_pools_kernel_check.py --backend TRITON_ATTN exited ")


def test_the_default_pools_scenario_runs_under_auto_and_needs_the_self_tests_line():
    """glm4-dflash-wide-window-auto: the speculative engine under VLLM_FORK_KV_POOLS=auto (gpu-check opts the other
    scenarios in), the same engine under the off switch; the verdict wants a carved plan and the self-test's line,
    and quotes the warning the engine gave instead."""
    import gpu_check
    import gpu_scenarios

    roles = gpu_check.jobs_for(gpu_scenarios.BY_NAME["glm4-dflash-wide-window-auto"], Path("/w"), Path("/l"), {})
    assert roles["spec"].request["env"] == {"VLLM_FORK_KV_POOLS": "auto"}
    assert roles["packing_off"].request["env"] == {"VLLM_FORK_DISABLE_KV_PACKING": "1"}
    stock = {"type": "KVCacheConfig", "groups": [{"slots": 1}] * 9, "num_blocks": 209715,
             "kv_cache_size_tokens": 1481021}
    carved = dict(stock, type="PooledKVCacheConfig", groups=[{"slots": 2}] * 8 + [{"slots": 1}],
                  kv_cache_size_tokens=2651211)
    passed = "INFO [kv_pools_auto.py:84] KV pools' start-up self-test passed on 1 worker(s) for KV groups [0] ..."
    off = {"kv_config": stock, "log_text": ""}
    assert gpu_check.v.auto_pools_verdict({"kv_config": carved, "log_text": passed}, off) == []
    warned = "WARNING KV pools not carved: their start-up self-test failed on rank 0: KV group 0: FLASH_ATTN read: x"
    problems = gpu_check.v.auto_pools_verdict({"kv_config": stock, "log_text": warned}, off)
    assert problems[0].startswith("pools (auto): no group carved: a KVCacheConfig")
    assert problems[-1].endswith(f"it says: {warned}")
