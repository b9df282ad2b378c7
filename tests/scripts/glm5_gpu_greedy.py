"""GPU check (H100/H200): a tiny dummy-weight GLM-5.3-Flash-shaped target, greedy with and without speculation.

Usage: python glm5_gpu_greedy.py OUT_JSON
Runs three engines in turn on one GPU (TP1): no speculation, MTP (the checkpoint's own layer), and DFlash2
(method "dflash2", a tiny DFlash2DraftModel with dummy weights). Speculation must not change greedy tokens.
Unverified so far: the session that wrote it had no GPU. Configs come from glm5_spec_probe.py (same shapes
the CPU tests use), with 8 layers so the drafter's target layer ids are in range.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from glm5_spec_probe import DRAFT, TEXT, VISION, _write  # noqa: E402

PROMPTS = [[5, 17, 42, 99, 7, 300], [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]]
LAYERS = 8
ENGINE = dict(load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16", max_model_len=1024,
              gpu_memory_utilization=0.5, enforce_eager=True, seed=0)
NO_PREFIX_CACHING = dict(ENGINE, enable_prefix_caching=False)
SPECULATIVE = ("mtp", "dflash2", "dflash2_no_prefix_caching")


def checkpoints(root: Path) -> tuple[str, str]:
    text = dict(TEXT, num_hidden_layers=LAYERS, mlp_layer_types=["dense"] + ["sparse"] * (LAYERS - 1),
                layer_types=["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(LAYERS)],
                indexer_types=["full"] * LAYERS)
    target = _write(root, "target", dict(model_type="glm5_next", architectures=["Glm5NextForConditionalGeneration"],
                                         text_config=dict(text, model_type="glm5_next_text"),
                                         vision_config=VISION, torch_dtype="bfloat16", tie_word_embeddings=False))
    # Shaped like the published DFlash2 draft: candidate selector, all-sliding-window, non-causal layers. One layer
    # with one KV head keeps its KV group under half the target's block stride, so without prefix caching the
    # fork packs it (2x the tokens per block): the GPU run then exercises packed draft blocks.
    draft = _write(root, "dflash2", dict(DRAFT, architectures=["DFlash2DraftModel"], is_causal=False,
                                         num_hidden_layers=1, num_key_value_heads=1,
                                         layer_types=["sliding_attention"], sliding_window=64,
                                         use_sliding_window=True, max_window_layers=0,
                                         dflash_config=dict(DRAFT["dflash_config"], target_layer_ids=[1, 3, 6],
                                                            selector_rank=16, selector_top_k=4)))
    return target, draft


def generate(target: str, speculative: dict | None, engine: dict) -> dict:
    from vllm import LLM, SamplingParams

    started = time.time()
    llm = LLM(model=target, speculative_config=speculative, **engine)
    outputs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS],
                           SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True, detokenize=False),
                           use_tqdm=False)
    return {"tokens": [list(o.outputs[0].token_ids) for o in outputs], "seconds": round(time.time() - started, 1)}


def serve_flags(engine: dict) -> list[str]:
    """The same settings as `vllm serve` flags, for spec-check."""
    flags = []
    for key, value in engine.items():
        name = key.replace("_", "-")
        flags += [f"--{name}"] if value is True else [f"--no-{name}"] if value is False else [f"--{name}", str(value)]
    return flags


def kv_plan_line(target: str, speculative: dict, engine: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "vllm._fork.spec_check", target, "--json", "--speculative-config",
                           json.dumps(speculative), *serve_flags(engine)], capture_output=True, text=True)
    try:
        checks = json.loads(done.stdout)["checks"]
    except (ValueError, KeyError):
        return f"spec-check exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return next((c["reason"] for c in checks if c["check"] == "KV cache plan"), "no KV plan line")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:  # the dummy checkpoints go with the run
        target, draft = checkpoints(Path(scratch))
        dflash2 = {"method": "dflash2", "model": draft, "num_speculative_tokens": 7}
        # Without prefix caching the fork packs the draft's window group into larger blocks (kv_pages.py).
        runs = {"nospec": (None, ENGINE), "mtp": ({"method": "mtp", "num_speculative_tokens": 1}, ENGINE),
                "dflash2": (dflash2, ENGINE), "dflash2_no_prefix_caching": (dflash2, NO_PREFIX_CACHING)}
        results = {}
        for name, (speculative, engine) in runs.items():
            try:
                results[name] = generate(target, speculative, engine)
            except Exception as exc:  # noqa: BLE001 - report every mode, not just the first failure
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            if speculative is not None and speculative["method"] == "dflash2":
                # spec-check on this GPU host, same settings: ", draft N" after the block size in its KV line
                # says the draft group got packed blocks, i.e. that path just ran.
                results[name]["kv_plan"] = kv_plan_line(target, speculative, engine)
        base = results["nospec"].get("tokens")
        for name in SPECULATIVE:
            results[name]["identical"] = base is not None and results[name].get("tokens") == base
        Path(sys.argv[1]).write_text(json.dumps(results, indent=1))
    sys.exit(0 if all(results[n].get("identical") for n in SPECULATIVE) else 1)
