"""One engine of `make gpu-check` in its own process (GPU only): generate greedily, report tokens and numbers.

Usage: python gpu_engine.py REQUEST_JSON OUT_JSON   (REQUEST: {"engine": EngineArgs kwargs, "prompts": "short"|"long",
"logprobs": bool}). The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0) so the KV-cache groups
reported are the ones its scheduler allocates from. The process exits after one run: its GPU memory goes with it.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

# Prompt token ids stay inside the word-level tokenizer the checkpoints ship (ids 5..250).
LOW, HIGH = 5, 250
SHORT = [200, 260, 320, 380, 440, 500, 560, 600]  # 8 concurrent requests (max_num_seqs 8)
# Long prompts for the packed scenarios: ≥ 3 x the packed draft block (2,304 tokens at most here, fp8 KV) and far
# beyond the drafter's 512-token window; 8 at once so blocks the window frees are reused by the others.
LONG = [7000, 7400, 7800, 8200, 8600, 9000, 9400, 9800]
MAX_TOKENS = 96


def prompts(kind: str) -> list[list[int]]:
    return [[random.Random(i * 7919 + n).randint(LOW, HIGH) for n in range(length)]
            for i, length in enumerate(LONG if kind == "long" else SHORT)]


def sharpen(model) -> list[str]:
    """Same in every run: the final norm at 1 and a seeded N(0, 1) lm_head, so argmax margins are wide (dummy
    weights of ±1e-3 leave near-ties everywhere). In place, so captured CUDA graphs see it too."""
    import torch

    touched = []
    for name, param in model.named_parameters():
        if name.endswith("lm_head.weight"):
            generator = torch.Generator().manual_seed(1234)
            param.data.copy_(torch.randn(param.shape, generator=generator).to(param.dtype))
            touched.append(name)
        elif name in ("model.norm.weight", "language_model.model.norm.weight"):
            param.data.fill_(1.0)
            touched.append(name)
    return touched


def kv_groups(llm) -> list[dict]:
    """The KV-cache groups the engine's scheduler allocates from: kind, draft or not, tokens per block."""
    config = llm.llm_engine.engine_core.engine_core.scheduler.kv_cache_config
    rows = []
    for group in config.kv_cache_groups:
        members = getattr(group.kv_cache_spec, "kv_cache_specs", None) or {"": group.kv_cache_spec}
        rows.append({"kind": type(next(iter(members.values()))).__name__, "layers": len(group.layer_names),
                     "draft": all(getattr(s, "is_draft", False) for s in members.values()),
                     "block_size": group.kv_cache_spec.block_size,
                     "window": getattr(next(iter(members.values())), "sliding_window", None)})
    return rows


def counters(llm) -> dict:
    names = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_accepted_tokens": "accepted"}
    return {names[m.name]: m.value for m in llm.get_metrics() if m.name in names}


def run(request: dict) -> dict:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM, SamplingParams

    started = time.time()
    llm = LLM(**request["engine"], disable_log_stats=False)  # get_metrics (acceptance) needs the stat loggers
    out = {"startup_seconds": round(time.time() - started, 1), "sharpened": llm.apply_model(sharpen)[0],
           "kv_groups": kv_groups(llm)}
    params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True, detokenize=False,
                            logprobs=2 if request.get("logprobs") else None)
    batch = [{"prompt_token_ids": p} for p in prompts(request["prompts"])]
    began = time.time()
    results = llm.generate(batch, params, use_tqdm=False)
    seconds = time.time() - began
    out["tokens"] = [list(r.outputs[0].token_ids) for r in results]
    out["prompt_lengths"] = [len(p["prompt_token_ids"]) for p in batch]
    out["tokens_per_second"] = round(sum(map(len, out["tokens"])) / seconds, 1)
    if request.get("logprobs"):  # per step: [(token, logprob)] of the two best, the base run's margins
        out["top2"] = [[sorted(((t, lp.logprob) for t, lp in step.items()), key=lambda x: -x[1])[:2]
                        for step in r.outputs[0].logprobs] for r in results]
    spec = counters(llm)
    if spec.get("drafts"):
        out["mean_acceptance_length"] = round(1 + spec["accepted"] / spec["drafts"], 3)
    return out


if __name__ == "__main__":
    request = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(request)))
