"""Oracle 1, V2: target and draft built by the V2 runner's own speculators and loaders, on the meta device.

Usage: python loaders_v2.py [--methods=M,...] MODELS OUT_JSON ARCH [ARCH ...]   (in .venv-test, the fork wheel installed)
MODELS/<arch>/config.json is each target (tools/oracles/reference.py or targets.py writes it). Per architecture and
per method that reads aux hidden states, everything `GPUModelRunner.load_model` does before the first CUDA kernel:
EngineArgs -> VllmConfig, the target built on the meta device, the runner's `set_eagle3_aux_hidden_state_layers`, the
speculator from `init_speculator` and its `load_model` (the draft loader: `load_eagle_model`, `load_dflash_model`,
`load_dspark_model`, the hidden-state extractor); then which modules the drafter holds as embedding and LM head,
judged by the target's own forward (wiring.py: another module fails the method). The stand-in SM90 platform and
the meta-device build are tests/scripts/gpu_dry_build.py's (imported, not copied); it answers device queries only.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack, contextmanager
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "scripts"))

import gpu_dry_build  # noqa: E402  (installs nothing at import)
from drafts import METHODS, speculative_config  # noqa: E402
from wiring import WRONG, wiring  # noqa: E402

# Every engine: bf16 as on the GPU box, dummy weights (nothing is loaded on meta), no compilation.
ENGINE = dict(load_format="dummy", dtype="bfloat16", max_model_len=512, max_num_seqs=4, max_num_batched_tokens=512,
              enforce_eager=True, skip_tokenizer_init=True, seed=0)


# Engine flags a model needs on the GPU box (what its model card says to pass).
ENGINE_EXTRA = {"FlintForCausalLM": {"attention_backend": "FLASHINFER"}}
# GPU kernels that take only published head shapes (DeepSeek-V4's fused quant + cache: 512 or 128): on the GPU
# box these layers get the published sizes. (Latent attention already has them: tools/oracles/shrink.py.)
DSV4_SHAPES = dict(head_dim=512, index_head_dim=128, qk_rope_head_dim=64)


def kernel_shapes(config: dict) -> dict:
    """hf_overrides giving DeepSeek-V4's compressed sparse attention the head sizes its SM90 kernels take."""
    text_key = next((k for k in ("text_config", "language_config") if isinstance(config.get(k), dict)), None)
    text = config[text_key] if text_key else config
    if not ("o_lora_rank" in text and "hc_mult" in text):
        return {}
    return {text_key: DSV4_SHAPES} if text_key else DSV4_SHAPES


def _first_line(exc: BaseException) -> str:
    """The error in one line; pydantic's (whose first line only counts errors) with its first error."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    head = " ".join(lines[:3]) if lines and "validation error" in lines[0] else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {head[:300]}"


def _where(exc: BaseException) -> str:
    """The innermost vLLM frames of a failure, for the record."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/vllm/" in f.filename][-3:]
    return " <- ".join(f"{f.filename.rpartition('/vllm/')[2]}:{f.lineno} {f.name}" for f in reversed(frames))


MODEL_PACKAGES = ("vllm.model_executor.models.", "vllm.models.")


def _name(obj) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def built_facts(target) -> dict:
    """What was built: the class, the model modules it is made of (the results' key reads their edits), where the
    aux layers were set (the capture's place), and whether it declares SupportsEagle3."""
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

    holders = [(name, module) for name, module in target.named_modules()
               if isinstance(module, EagleModelMixin) and module.aux_hidden_state_layers]
    language = target.get_language_model() if hasattr(target, "get_language_model") else target
    inner = getattr(language, "model", None)
    # Stock 0.33.0's EAGLE loaders read `.model` and its embed_tokens / embedding (V1) or fail (V2 EAGLE, DSpark).
    stock_reach = inner is not None and (hasattr(inner, "embed_tokens") or hasattr(inner, "embedding"))
    return {"built": _name(target), "declared": bool(supports_eagle3(target)), "stock_loaders_reach": stock_reach,
            "inner_mixin": any(isinstance(m, EagleModelMixin) for m in language.modules()),
            "modules": sorted({type(m).__module__ for m in target.modules()
                               if type(m).__module__.startswith(MODEL_PACKAGES)}),
            "capture_at": [f"{name or 'self'} ({type(module).__name__})" for name, module in holders]}


def registry_module(arch: str) -> list[str]:
    """The module vLLM's registry names for `arch` (what is known when nothing could be built)."""
    from vllm.model_executor.models.registry import ModelRegistry

    entry = ModelRegistry.models.get(arch)
    return [entry.module_name] if getattr(entry, "module_name", None) else []


def build(target: Path, method: str, drafts: Path, state: dict) -> dict:
    """One (target, method) through the V2 runner's load path; raises on the first failure."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

    speculative = speculative_config(method, target, drafts)
    overrides = kernel_shapes(json.loads((target / "config.json").read_text()))
    vc = EngineArgs(model=str(target), speculative_config=speculative, hf_overrides=overrides,
                    **ENGINE | ENGINE_EXTRA.get(target.name, {})).create_engine_config()
    gpu_dry_build.model_parallel(vc)  # this target's groups (the expert-parallel one only for MoE)
    state.pop("target", None)
    with _aux_layers_set_on_the_target(state, set_eagle3_aux_hidden_state_layers):
        target_model, speculator = gpu_dry_build.build(vc)
    draft = getattr(speculator, "model", None)
    out = {"speculator": type(speculator).__name__, "draft": type(draft).__name__ if draft is not None else None,
           **built_facts(target_model)}
    if draft is not None:  # the modules it holds, judged by the target's own forward
        out["wiring"] = wiring(vc, target_model, draft)
    return out


def miswired(entry: dict) -> str | None:
    """Why a built drafter holds the wrong module, if it does."""
    return next((detail for verdict, detail in entry.get("wiring", {}).values() if verdict == WRONG), None)


@contextmanager
def _aux_layers_set_on_the_target(state: dict, set_layers):
    """GPUModelRunner.load_model sets the target's aux layers right after building it, before the speculator
    loads: gpu_dry_build.build builds both in one call, so its target build (the call without a model_config)
    is followed by the same `set_eagle3_aux_hidden_state_layers` here."""
    original = gpu_dry_build._build_on_meta

    def build_on_meta(vllm_config, model_config=None, prefix: str = ""):
        model = original(vllm_config, model_config, prefix)
        if model_config is None:
            state["target"] = model  # what a later failure is reported against
            # The runner's own test (model_runner.py, 0.34.0): the speculative config's uses_aux_hidden_states.
            if vllm_config.speculative_config.uses_aux_hidden_states:
                set_layers(model, vllm_config.speculative_config)
        return model

    gpu_dry_build._build_on_meta = build_on_meta
    try:
        yield
    finally:
        gpu_dry_build._build_on_meta = original


# Failures of the meta-device build itself, not of vLLM on a GPU: a model that computes constants from tensors
# while it is constructed (BLOOM's ALiBi slopes) cannot be built without memory. Runner V1 on the CPU builds it.
META_LIMITS = ("Cannot copy out of meta tensor",)


def main(argv: list[str]) -> int:
    methods = METHODS
    if argv and argv[0].startswith("--methods="):  # a subset (the CI sample); the full run takes every method
        methods, argv = tuple(argv[0].partition("=")[2].split(",")), argv[1:]
    models, out_json, archs = Path(argv[0]), Path(argv[1]), argv[2:]
    results = json.loads(out_json.read_text()) if out_json.exists() else {}
    state: dict = {}
    with tempfile.TemporaryDirectory(prefix="oracle-v2-") as scratch, ExitStack() as stack:
        gpu_dry_build.install_platform(Path(scratch))
        # vLLM inspects a model class in a second interpreter, where the stand-in platform is not installed (a
        # CUDA-only class would not import there): spec-check's in-process inspection, as the dry run needs.
        from vllm._fork.spec_check.inspection import inspect_in_process

        stack.enter_context(inspect_in_process())
        drafts = Path(scratch) / "drafts"
        gpu_dry_build.init_world()
        for arch in archs:
            for method in methods:
                started = time.time()
                try:
                    entry = {"ok": True, **build(models / arch, method, drafts, state)}
                    if why := miswired(entry):
                        entry |= {"ok": False, "reason": f"built, but {why}"}
                except Exception as exc:  # noqa: BLE001 - a failed build is this row's finding
                    entry = {"ok": False, "reason": _first_line(exc), "where": _where(exc)}
                    if state.get("target") is not None:
                        entry |= built_facts(state["target"])
                    if any(limit in entry["reason"] for limit in META_LIMITS):
                        entry["ok"], entry["not_built"] = None, "the target cannot be built on the meta device"
                entry["seconds"] = round(time.time() - started, 2)
                state.pop("target", None)
                entry.setdefault("modules", registry_module(arch))
                results.setdefault(arch, {})[method] = entry
                print(f"{arch} {method}: {'ok' if entry['ok'] else entry.get('reason')}", flush=True)
            out_json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
