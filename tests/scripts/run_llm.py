"""One offline vLLM run on the CPU, greedy, reported as JSON (tokens, or the error that stopped it).

Usage: python run_llm.py OUT_JSON MODELS_DIR TARGET MODE [LLM_KWARGS_JSON]
TARGET: glm4 | qwen2audio (folders of tiny_models.py); MODE: nospec | eagle3 | dflash.
The vllm package is whatever this interpreter imports (PYTHONPATH may put the fork's tree first).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

PROMPTS = [[2, 10, 11, 12, 13, 14, 15, 16], [2, 100, 37, 200, 5, 77], [2, *range(40, 72)]]
MAX_TOKENS = 24
# The engine of every run; the KV pool is given explicitly so that spec-check can plan the same one.
ENGINE = dict(dtype="float32", enforce_eager=True, max_model_len=256, max_num_seqs=4, kv_cache_memory_bytes=1 << 30)


def serve_flags() -> list[str]:
    """ENGINE as `vllm serve` (and `vllm spec-check`) flags."""
    flags = []
    for key, value in ENGINE.items():
        flag = "--" + key.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


def _speculative(mode: str, models: Path) -> dict | None:
    """`nospec`, `METHOD` (draft folder named like the method) or `METHOD:FOLDER`."""
    if mode == "nospec":
        return None
    method, _, folder = mode.partition(":")
    return {"method": method, "model": str(models / (folder or method)), "num_speculative_tokens": 2}


def run(models: Path, target: str, mode: str, extra: dict) -> dict:
    """Generate with one engine; any failure is returned with its text, never raised."""
    started = time.time()
    try:
        import vllm
        from vllm import LLM, SamplingParams

        llm = LLM(model=str(models / target), seed=0, speculative_config=_speculative(mode, models), **ENGINE,
                  **extra)
        params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
        outputs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
        tokens = [list(o.outputs[0].token_ids) for o in outputs]
        return {"ok": True, "tokens": tokens, "vllm": vllm.__version__, "vllm_file": vllm.__file__,
                "seconds": round(time.time() - started, 1)}
    except BaseException as exc:  # noqa: BLE001 - the engine's own error is the result
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:],
                "seconds": round(time.time() - started, 1)}


if __name__ == "__main__":  # vLLM spawns workers: the guard keeps them from re-running this
    out, models, target, mode = sys.argv[1:5]
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    Path(out).write_text(json.dumps(run(Path(models), target, mode, extra)))
