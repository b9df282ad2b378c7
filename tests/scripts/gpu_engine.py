"""Engines of `make gpu-check`: generate greedily, report tokens, speculation counters and what the engine built.

Usage: python gpu_engine.py REQUEST_JSON OUT_JSON     one engine (gpu-check: its own process, GPU memory goes with it)
       python gpu_engine.py --many RUNS_JSON          several in this interpreter (the CPU replay), each
                                                       {"request": ..., "out": path}
REQUEST: {"engine": EngineArgs kwargs, "prompts": "short" | "long" | [[ids]...], "then": [[ids]...] (a second
batch after the first finished: prefix-cache hits), "logprobs": bool, "sharpen": bool, "env": {...},
"max_tokens": n}. The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so the KV groups, the
speculator and the counters reported are the engine's own. A failure is the result, with traceback and versions.
"""

from __future__ import annotations

import gc
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

# Prompt token ids stay inside the word-level tokenizer the checkpoints ship (ids 5..250).
LOW, HIGH = 5, 250
SHORT = [200, 260, 320, 380, 440, 500, 560, 600]  # 8 concurrent requests (max_num_seqs 8)
# Long prompts for the packed scenarios: ≥ 3 x the packed draft block (2,304 tokens at most here, fp8 KV) and far
# beyond the drafter's 512-token window; 8 at once so blocks the window frees are reused by the others.
LONG = [7000, 7400, 7800, 8200, 8600, 9000, 9400, 9800]
MAX_TOKENS = 96
TOP_K = 5  # logprobs per step: a tie among three tokens still shows its third
SHARPEN_SEED = 1234
COUNTERS = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
            "vllm:spec_decode_num_accepted_tokens": "accepted", "vllm:prefix_cache_hits": "prefix_cache_hits",
            "vllm:prefix_cache_queries": "prefix_cache_queries"}


def prompts(kind) -> list[list[int]]:
    if isinstance(kind, list):
        return kind
    return [[random.Random(i * 7919 + n).randint(LOW, HIGH) for n in range(length)]
            for i, length in enumerate(LONG if kind == "long" else SHORT)]


def _final_norm(model):
    """The norm right before the lm_head (its name differs between text models and multimodal wrappers)."""
    modules = dict(model.named_modules())
    for name in ("model.norm", "language_model.model.norm", "model.language_model.norm"):
        if name in modules:
            return name, modules[name]
    raise RuntimeError("sharpen: no final norm (model.norm) found; the lm_head scale cannot be set")


def sharpen(model) -> dict:
    """A seeded N(0, 1) lm_head divided by the final norm's gain, in place (captured CUDA graphs see it).

    The norm itself is left alone: its gain is measured by running it on ones (RMSNorm computes x*w, Gemma's
    x*(1+w)), so logits get a spread of about sqrt(hidden) nats whatever the norm's kind and dummy weights."""
    import torch

    norm_name, norm = _final_norm(model)
    heads = [(n, p) for n, p in model.named_parameters() if n.endswith("lm_head.weight")]
    if not heads:
        raise RuntimeError("sharpen: no lm_head.weight parameter found")
    name, weight = heads[0]
    with torch.no_grad():
        gains = norm(torch.ones(1, weight.shape[1], dtype=weight.dtype, device=weight.device)).float()
        gain = float(gains.pow(2).mean().sqrt())
        if not gain > 0:
            raise RuntimeError(f"sharpen: final norm {norm_name} has gain {gain}")
        fresh = torch.randn(weight.shape, generator=torch.Generator().manual_seed(SHARPEN_SEED)) / gain
        weight.copy_(fresh.to(weight.dtype))
        # Read back through the parameter the model uses: the re-initialisation must really be in place.
        if not torch.equal(weight.detach().cpu(), fresh.to(weight.dtype)):
            raise RuntimeError(f"sharpen: {name} does not hold the new weights after the copy")
    return {"lm_head": name, "norm": norm_name, "gain": gain, "checksum": float(weight.detach().float().abs().sum())}


def kv_groups(llm) -> list[dict]:
    """The KV-cache groups the engine's scheduler allocates from: kind, draft or not, tokens per block."""
    config = llm.llm_engine.engine_core.engine_core.scheduler.kv_cache_config
    rows = []
    for group in config.kv_cache_groups:
        members = getattr(group.kv_cache_spec, "kv_cache_specs", None) or {"": group.kv_cache_spec}
        first = next(iter(members.values()))
        rows.append({"kind": type(first).__name__, "layers": len(group.layer_names),
                     "draft": all(getattr(s, "is_draft", False) for s in members.values()),
                     "block_size": group.kv_cache_spec.block_size, "window": getattr(first, "sliding_window", None)})
    return rows


def _speculator(worker) -> str | None:
    """The class the model runner drafts with: V2's `speculator`, V1's `drafter`."""
    runner = getattr(worker, "model_runner", None) or getattr(getattr(worker, "worker", None), "model_runner", None)
    drafter = getattr(runner, "speculator", None) or getattr(runner, "drafter", None)
    return type(drafter).__name__ if drafter is not None else None


def counters(llm) -> dict:
    return {COUNTERS[m.name]: m.value for m in llm.get_metrics() if m.name in COUNTERS}


def versions() -> dict:
    found = {"python": sys.version.split()[0]}
    for package in ("vllm", "torch"):
        try:
            module = __import__(package)
            found[package] = module.__version__
        except Exception as exc:  # noqa: BLE001 - a missing package is itself the answer
            found[package] = f"not importable: {exc}"
    return found


def _generate(llm, request: dict, params) -> list:
    results = llm.generate([{"prompt_token_ids": p} for p in prompts(request["prompts"])], params, use_tqdm=False)
    if request.get("then"):  # after the first batch finished: its blocks are in the prefix cache
        results += llm.generate([{"prompt_token_ids": p} for p in request["then"]], params, use_tqdm=False)
    return results


def run(request: dict) -> dict:
    """One engine: build, (sharpen), generate, read the engine's own numbers, shut down."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    saved = {k: os.environ.get(k) for k in request.get("env", {})}
    os.environ.update(request.get("env", {}))
    started, llm = time.time(), None
    try:
        from vllm import LLM, SamplingParams

        llm = LLM(**request["engine"], disable_log_stats=False)  # get_metrics needs the stat loggers
        out = {"ok": True, "startup_seconds": round(time.time() - started, 1), "kv_groups": kv_groups(llm),
               "speculator": llm.collective_rpc(_speculator)[0], "versions": versions()}
        if request.get("sharpen"):
            out["sharpened"] = llm.apply_model(sharpen)[0]
        params = SamplingParams(temperature=0.0, max_tokens=request.get("max_tokens", MAX_TOKENS), ignore_eos=True,
                                detokenize=False, logprobs=TOP_K if request.get("logprobs") else None)
        began = time.time()
        results = _generate(llm, request, params)
        seconds = time.time() - began
        out["tokens"] = [list(r.outputs[0].token_ids) for r in results]
        out["prompts"] = [list(r.prompt_token_ids) for r in results]
        out["generate_seconds"] = round(seconds, 2)
        out["tokens_per_second"] = round(sum(map(len, out["tokens"])) / seconds, 1)
        if request.get("logprobs"):  # per step: [(token, logprob)] of the TOP_K best, best first
            out["topk"] = [[sorted(((t, lp.logprob) for t, lp in step.items()), key=lambda x: -x[1])[:TOP_K]
                            for step in r.outputs[0].logprobs] for r in results]
        out |= counters(llm)
        if out.get("drafts"):
            out["mean_acceptance_length"] = round(1 + out["accepted"] / out["drafts"], 3)
        return out
    except BaseException as exc:  # noqa: BLE001 - the engine's failure is this run's result
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:],
                "versions": versions()}
    finally:
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def run_timed(request: dict) -> dict:
    """run() with the engine's whole wall time (build, generate, shutdown): its share of the budget."""
    started = time.time()
    result = run(request)
    result["wall_seconds"] = round(time.time() - started, 1)
    return result


if __name__ == "__main__":  # vLLM may spawn workers: the guard keeps them from re-running this
    if sys.argv[1] == "--many":
        for entry in json.loads(Path(sys.argv[2]).read_text()):
            Path(entry["out"]).write_text(json.dumps(run_timed(entry["request"])))
    else:
        Path(sys.argv[2]).write_text(json.dumps(run_timed(json.loads(Path(sys.argv[1]).read_text()))))
