"""Offline vLLM runs on the CPU, greedy, one after another in this interpreter, each reported as JSON.

Usage: python run_llm.py RUNS_JSON
RUNS_JSON is a list of runs: {"out": result JSON path, "log": log path, "model": target folder,
"speculative": a speculative config or null, "extra": more LLM kwargs, "env": environment variables set for this
run only (optional), "plant": a fault of kv_pools_plants.py put into the fork's code for this run only
(optional)}. Each run's result is tokens or the error that stopped it; everything the run prints (its engine process
included) goes to its own log.
The vllm package is whatever this interpreter imports (PYTHONPATH may put the fork's tree first).

The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0): the model runner, drafter and
model code are the same as under `vllm serve`, but vLLM is imported once for all runs instead of once per
engine process, and an engine error is raised here with its traceback.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

PROMPTS = [[2, 10, 11, 12, 13, 14, 15, 16], [2, 100, 37, 200, 5, 77], [2, *range(40, 72)]]
MAX_TOKENS = 24
NUM_SPECULATIVE_TOKENS = 2
# The engine of every run; the KV pool is given explicitly so that spec-check can plan the same one.
ENGINE = dict(dtype="float32", enforce_eager=True, max_model_len=256, max_num_seqs=4, kv_cache_memory_bytes=1 << 30)


def serve_flags() -> list[str]:
    """ENGINE as `vllm serve` (and `vllm spec-check`) flags."""
    flags = []
    for key, value in ENGINE.items():
        flag = "--" + key.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


def speculative_config(speculative: dict | None, models: Path) -> dict | None:
    """A case's speculative config with its draft folder made a path under `models`."""
    if speculative is None:
        return None
    return {"num_speculative_tokens": NUM_SPECULATIVE_TOKENS, **speculative,
            "model": str(models / speculative["model"])}


@contextmanager
def _planted(name: str | None):
    """A fault of kv_pools_plants.py in the fork's code for one run (imported only then: it needs the fork)."""
    if name is None:
        yield
        return
    from kv_pools_plants import PLANTS

    with PLANTS[name]():
        yield


@contextmanager
def _environment(env: dict[str, str]):
    """Set `env` for one run (the engine reads such switches when it plans), then restore what was there."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


@contextmanager
def _output_to(log: Path):
    """Send this process's stdout/stderr, and those of the engine processes it starts, to `log`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run(model: str, speculative: dict | None, extra: dict) -> dict:
    """Generate with one engine and shut it down; any failure is returned with its text, never raised."""
    started = time.time()
    llm = None
    try:
        import vllm
        from vllm import LLM, SamplingParams

        llm = LLM(model=model, seed=0, speculative_config=speculative, **(ENGINE | extra))
        params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
        outputs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
        tokens = [list(o.outputs[0].token_ids) for o in outputs]
        # The pool the engine allocated after loading and profiling (its log says it only once per process).
        kv_tokens = llm.llm_engine.vllm_config.cache_config.kv_cache_size_tokens
        return {"ok": True, "tokens": tokens, "kv_cache_tokens": kv_tokens, "vllm": vllm.__version__,
                "vllm_file": vllm.__file__, "seconds": round(time.time() - started, 1)}
    except BaseException as exc:  # noqa: BLE001 - the engine's own error is the result
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:],
                "seconds": round(time.time() - started, 1)}
    finally:
        if llm is not None:  # the next run gets the memory of this one's engine
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


if __name__ == "__main__":  # vLLM may spawn workers: the guard keeps them from re-running this
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    for spec in json.loads(Path(sys.argv[1]).read_text()):
        with _output_to(Path(spec["log"])), _environment(spec.get("env") or {}), _planted(spec.get("plant")):
            result = run(spec["model"], spec["speculative"], spec.get("extra") or {})
        Path(spec["out"]).write_text(json.dumps(result))
