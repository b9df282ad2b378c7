"""The attention backend of each layer group on `--gpu`, and the kernel limits a model × GPU × k runs into.

The target's groups come from its configs (vLLM's ModelConfig: head size, MLA, the DSA indexer, sliding
layers; linear-attention layers keep a state of their own and are not selected); each group is put through
vLLM's own `get_attn_backend`, which builds the layer's selector config as an attention layer does and asks the
platform (here: backends.py on the stand-in). The draft's layers come from the draft itself, built on meta
(draft_build.py), so its non-causal DFlash/DSpark attention is selected exactly as its layers ask.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from vllm._fork.spec_check import params as P
from vllm._fork.spec_check.backends import SELECTIONS, NoBackend
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, UNKNOWN, Finding
from vllm._fork.spec_check.gpus import Gpu
from vllm._fork.vocabulary import CheckName

TARGET, DRAFT, INDEXER = CheckName.TARGET_ATTENTION, CheckName.DRAFT_ATTENTION, CheckName.SPARSE_INDEXER
FIX = ("use a GPU with a backend for these layers (--gpu), or --attention-backend / the speculative config's "
       "attention_backend naming one that fits")


@contextmanager
def _uncached():
    """vLLM caches selections per process; a batch of checks (tests) may ask the same layer for another GPU."""
    from vllm.v1.attention import selector

    cached = selector._cached_get_attn_backend
    selector._cached_get_attn_backend = getattr(cached, "__wrapped__", cached)
    try:
        yield
    finally:
        selector._cached_get_attn_backend = cached


def target_groups(model_config, target: dict) -> list[tuple[str, int, dict]]:
    """(kind, layer count, get_attn_backend arguments) of the target's attention layers."""
    text = P._text(target)
    kinds = Counter(P.layer_kinds(text)) if "num_hidden_layers" in text else Counter(
        full=model_config.get_total_num_hidden_layers())
    common = {"head_size": model_config.get_head_size(), "dtype": model_config.dtype}
    if model_config.use_mla:
        # DeepSeek-V3.2-style models pass use_sparse when their config has a DSA indexer (deepseek_v2: is_v32).
        sparse = hasattr(model_config.hf_text_config, "index_topk")
        attention = sum(n for kind, n in kinds.items() if kind in ("full", "sliding", "chunked"))
        return [("sparse MLA" if sparse else "MLA", attention, {**common, "use_mla": True, "use_sparse": sparse})]
    groups = []
    for kind, count in sorted(kinds.items()):
        if kind in ("full", "sliding", "chunked"):
            groups.append((kind, count, {**common, "has_sliding_window": kind == "sliding"}))
    return groups


def _cache_file(vllm_config, gpu: Gpu) -> Path | None:
    """Where this answer is kept: vLLM's cache root, keyed by everything the selection reads. Importing the
    candidate backends (FlashInfer's above all) costs more than the rest of spec-check's checks together."""
    import vllm
    from vllm import envs

    model_config, cache = vllm_config.model_config, vllm_config.cache_config
    try:
        text = model_config.hf_text_config.to_json_string(use_diff=False)
    except (AttributeError, TypeError, ValueError):
        return None
    code = b"".join(Path(__file__).with_name(name).read_bytes() for name in ("attention.py", "backends.py"))
    key = json.dumps([vllm.__version__, hashlib.sha256(code).hexdigest(), gpu.name, gpu.capability, text, str(model_config.dtype),
                      str(cache.cache_dtype), cache.block_size if cache.user_specified_block_size else None,
                      repr(vllm_config.attention_config), repr(vllm_config.parallel_config.tensor_parallel_size),
                      vllm_config.parallel_config.prefill_context_parallel_size,
                      vllm_config.parallel_config.decode_context_parallel_size, str(vllm_config.kv_transfer_config),
                      envs.VLLM_BATCH_INVARIANT, envs.VLLM_MLA_DISABLE], default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return Path(envs.VLLM_CACHE_ROOT) / "spec_check" / f"attention-{digest}.json"


def _select_groups(vllm_config, target: dict) -> tuple[list[str], str | None]:
    """("N kind: BACKEND" per group, the failure text or None), by vLLM's own get_attn_backend."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.selector import get_attn_backend

    model_config = vllm_config.model_config
    heads = model_config.get_num_attention_heads(vllm_config.parallel_config)
    parts = []
    with set_current_vllm_config(vllm_config), _uncached():
        for kind, count, arguments in target_groups(model_config, target):
            first = len(SELECTIONS)
            try:
                get_attn_backend(kv_cache_dtype=vllm_config.cache_config.cache_dtype, num_heads=heads, **arguments)
            except NoBackend as exc:
                return parts, f"{count} {kind} layers: {exc}"
            parts.append(f"{count} {kind}: {SELECTIONS[-1].describe() if len(SELECTIONS) > first else '?'}")
    return parts, None


def target_finding(vllm_config, target: dict, gpu: Gpu, stand_in: bool) -> Finding | None:
    """The backend of each target layer group on `gpu` (only on the stand-in: a real host selects for itself)."""
    from vllm._fork.spec_check.weights import _with_defaults

    if not stand_in:
        return None
    if gpu.vendor != "nvidia":
        return Finding(TARGET, INFO, f"not evaluated for {gpu.name}: ROCm's priorities depend on AITER being "
                       "installed on the serving host")
    target = _with_defaults(target, vllm_config.model_config.hf_config)
    cached = _cache_file(vllm_config, gpu)
    try:
        parts, failure = json.loads(cached.read_text()) if cached and cached.is_file() else (None, None)
    except (OSError, ValueError):
        parts, failure = None, None
    if parts is None:
        parts, failure = _select_groups(vllm_config, target)
        try:
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps([parts, failure]))
        except OSError:  # a read-only cache: answer without keeping it
            pass
    if failure:
        return Finding(TARGET, FAIL, failure, FIX)
    text = P._text(target)
    linear = Counter(P.layer_kinds(text)).get("linear", 0) if "num_hidden_layers" in text else 0
    extra = f"; {linear} linear-attention layers keep their own state" if linear else ""
    return Finding(TARGET, PASS, f"{'; '.join(parts)} on {gpu.name} ({gpu.target}){extra}")


def draft_finding(selections: list, gpu: Gpu) -> Finding | None:
    """The backends the draft's attention layers got while it was built (draft_build.py)."""
    if not selections:
        return None
    groups = Counter()
    for selection in selections:
        config = selection.config
        traits = [f"head {config.head_size}", "MLA" * bool(config.use_mla),
                  "sliding" * bool(config.has_sliding_window), "non-causal" * bool(config.use_non_causal)]
        groups[(", ".join(t for t in traits if t), selection.describe())] += 1
    text = "; ".join(f"{traits}: {backend}" for (traits, backend), _ in groups.items())
    if _fa2_non_causal_on_sm12x(selections, gpu):
        return Finding(DRAFT, UNKNOWN, f"{text} on {gpu.name} ({gpu.target}): vLLM's own checks accept FLASH_ATTN for "
                       "non-causal layers here (platforms/cuda.py _get_backend_priorities lists it first outside "
                       "SM10x; FlashAttentionBackend takes non-causal and capability >= 8.0), and on SM12x it runs "
                       "FA2 (fa_utils.get_flash_attn_version), whose varlen kernel device-asserted at engine startup "
                       "for a DFlash draft on GB10 after every Python check passed (vllm#50707); only the kernel "
                       "can tell", SM12X_FIX)
    return Finding(DRAFT, PASS, f"{text} on {gpu.name} ({gpu.target})")


SM12X_FIX = ('set "attention_backend": "FLASHINFER" in the speculative config (vLLM accepts it for non-causal draft '
             "layers), or run one request on the GPU host before a long deployment")


def _fa2_non_causal_on_sm12x(selections: list, gpu: Gpu) -> bool:
    """A non-causal draft layer on FLASH_ATTN on an SM12x GPU: the path vllm#50707 saw die in the kernel."""
    return gpu.vendor == "nvidia" and gpu.capability[0] == 12 and any(
        s.chosen == "FLASH_ATTN" and getattr(s.config, "use_non_causal", False) for s in selections)


def no_backend_finding(exc: NoBackend, gpu: Gpu) -> Finding:
    return Finding(DRAFT, FAIL, f"the draft's layers have no attention backend on {gpu.name} ({gpu.target}): "
                   f"{exc}", FIX)


def indexer_finding(vllm_config, gpu: Gpu, stand_in: bool) -> Finding | None:
    """DeepSeek sparse attention's indexer takes 1 + k query rows per request in decode; on SM90 DeepGEMM's
    paged MQA logits kernel runs only some of those natively (vllm/utils/deep_gemm.py native_next_n_supported)
    and vLLM flattens the rest to one row per query (v1/attention/backends/mla/indexer.py _use_flattening)."""
    spec = vllm_config.speculative_config
    model_config = vllm_config.model_config
    if spec is None or not spec.num_speculative_tokens or not model_config.use_mla:
        return None
    if not hasattr(model_config.hf_text_config, "index_topk") or not stand_in or gpu.capability[0] != 9:
        return None  # the kernel's next_n limit is Hopper's (NVIDIA SM90); Blackwell takes any next_n
    try:
        from vllm.v1.attention.backends.mla import indexer
    except ImportError:
        return None
    native = getattr(indexer, "_supports_native_decode", None)
    if native is None:
        return Finding(INDEXER, UNKNOWN, "this vLLM's indexer does not say which next_n it runs natively",
                       "check the indexer kernel on the GPU host")
    from vllm import platforms
    from vllm._fork.spec_check.backends import as_on_the_gpu_host

    next_n = 1 + spec.num_speculative_tokens
    with as_on_the_gpu_host(type(platforms.current_platform)):
        runs_natively = native(next_n)
    if runs_natively:
        return Finding(INDEXER, PASS, f"the DSA indexer's paged MQA logits kernel takes next_n={next_n} natively "
                       f"on {gpu.target}")
    # INFO, not WARN: a warning means acceptance collapses; flattened decode only costs KV re-reads.
    return Finding(INDEXER, INFO, f"k={spec.num_speculative_tokens} gives the DSA indexer next_n={next_n}, which "
                   f"DeepGEMM's paged MQA logits kernel does not take on {gpu.target}: vLLM flattens decode to one "
                   "row per query (it starts; each draft token re-reads the KV tile). DeepGEMM builds without that "
                   "fallback assert next_n in {1, 2} and die in CUDA-graph profiling (vllm#43457)",
                   "num_speculative_tokens 1 or 3 run natively on Hopper (next_n 2 or 4)")
