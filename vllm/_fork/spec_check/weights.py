"""Do the weights fit, with room for one request's KV cache? Bytes per GPU from the configs alone (no GPU needed).

Parameters come from params.py, bytes from the dtype vLLM picked and the checkpoint's quantization_config, and
the split from TP/PP/EP as vLLM shards them. The KV need is a lower bound (sliding layers at their window,
linear-attention state left out), so a "fail" here is certain; a close call is "cannot tell".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vllm._fork.spec_check import params as P
from vllm._fork.spec_check.findings import FAIL, PASS, UNKNOWN, Finding
from vllm._fork.spec_check.gpus import GIB, Gpu
from vllm._fork.vocabulary import CheckName

NAME = CheckName.WEIGHTS_FIT
MARGIN = 0.04  # of device memory, for activations, CUDA graphs and the allocator (not modelled)


class CannotTell(Exception):
    """The config does not say enough to size the weights (an unknown quantization, missing fields)."""


@dataclass(frozen=True)
class Quant:
    """Bytes per parameter of the linear layers, the routed experts and the rest (embeddings, head)."""

    linear: float
    experts: float
    rest: float
    name: str


def quantization(config: dict, dtype_bytes: int) -> Quant:
    """The checkpoint's weight format: fp8 (per-tensor or block), MXFP4/NVFP4, GPTQ/AWQ, compressed-tensors."""
    q = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config")
    if not q:
        return Quant(dtype_bytes, dtype_bytes, dtype_bytes, f"{8 * dtype_bytes}-bit")
    method = str(q.get("quant_method") or q.get("quant_algo") or "").lower()
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size") or [128, 128]
        scale = 4 / (block[0] * block[1])  # one float32 scale per block
        return Quant(1 + scale, 1 + scale, dtype_bytes, "fp8" + (f" blocks {block[0]}x{block[1]}" * bool(q.get(
            "weight_block_size"))))
    if method == "mxfp4":  # gpt-oss: experts in 4-bit with one e8m0 scale per 32; the rest stays in dtype
        return Quant(dtype_bytes, 0.5 + 1 / 32, dtype_bytes, "mxfp4 experts")
    if method in ("nvfp4", "modelopt_fp4") or "fp4" in method:
        return Quant(0.5 + 1 / 16, 0.5 + 1 / 16, dtype_bytes, "nvfp4")
    if method in ("modelopt",) and str(q.get("quant_algo", "")).upper() == "FP8":
        return Quant(1, 1, dtype_bytes, "fp8")
    if method in ("gptq", "awq", "gptq_marlin", "awq_marlin", "bitsandbytes"):
        bits, group = q.get("bits") or (4 if q.get("load_in_4bit") else 8), q.get("group_size") or 128
        per = bits / 8 + (2 + bits / 8) / max(group, 1)  # fp16 scale and packed zero point per group
        return Quant(per, per, dtype_bytes, f"{method} {bits}-bit")
    if method == "compressed-tensors":
        groups = [g.get("weights") or {} for g in (q.get("config_groups") or {}).values()]
        bits = [g.get("num_bits") for g in groups if g.get("num_bits")]
        if bits:
            per = max(bits) / 8 + (1 / 16 if max(bits) <= 4 else 0)
            return Quant(per, per, dtype_bytes, f"compressed-tensors {max(bits)}-bit")
    raise CannotTell(f"quantization method '{method or q}' is not sized by spec-check")


def bytes_per_rank(p: P.Params, quant: Quant, tp: int, pp: int, ep_size: int) -> float:
    """The largest rank's share: layers split over PP stages, linear layers over TP, experts over EP or TP."""
    share = math.ceil(p.num_layers / pp) / p.num_layers
    layers = share * (p.layers * quant.linear / tp + p.replicated * quant.linear + p.experts * quant.experts / ep_size)
    ends = max(p.embed, p.lm_head) if pp > 1 else p.embed + p.lm_head
    return layers + (ends + p.vision) * quant.rest / tp


def kv_bytes_per_token(config: dict, tp: int, kv_bytes: int, tokens: int, pp: int = 1) -> float:
    """A lower bound of the target's KV bytes per token of one `tokens`-long request on the fullest rank (a
    pipeline stage holds the KV of its own layers only, split as vLLM's get_pp_indices splits them)."""
    c = P._text(config)
    window = c.get("sliding_window") or tokens
    chunk = c.get("attention_chunk_size") or tokens  # vLLM's ChunkedLocalAttentionSpec keeps one chunk
    if c.get("kv_lora_rank"):
        per_layer = (c["kv_lora_rank"] + c.get("qk_rope_head_dim", 64)) * kv_bytes  # MLA: not split by TP
    else:
        heads = c.get("num_key_value_heads") or c["num_attention_heads"]
        head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        per_layer = 2 * max(1, heads // tp) * head_dim * kv_bytes
    share = {"full": 1.0, "sliding": min(1, window / tokens), "chunked": min(1, chunk / tokens), "linear": 0.0,
             "none": 0.0}
    layers = [share[kind] for kind in P.layer_kinds(c)]
    return per_layer * max(sum(layers[slice(*_stage(len(layers), rank, pp))]) for rank in range(pp))


def _stage(num_layers: int, rank: int, pp: int) -> tuple[int, int]:
    """The layers pipeline stage `rank` holds, by vLLM's own split."""
    from vllm.distributed.utils import get_pp_indices

    return get_pp_indices(num_layers, rank, pp) if pp > 1 else (0, num_layers)


def fit(gpu: Gpu, memory_fraction: float, kv_memory: int | None, weights: float, kv_one_request: float
        ) -> tuple[str, str]:
    """(status, reason) for weights plus the smallest KV cache vLLM accepts, against the GPU's memory."""
    limit = gpu.memory_bytes if kv_memory else gpu.memory_bytes * memory_fraction
    kv_need = kv_memory or kv_one_request
    left = limit - weights - kv_need
    where = (f"{gpu.memory_bytes / GIB:.0f} GiB {gpu.name}" if kv_memory else
             f"{memory_fraction:.2f} x {gpu.memory_bytes / GIB:.0f} GiB {gpu.name}")
    text = f"weights {weights / GIB:.1f} GiB per GPU + KV {kv_need / GIB:.2f} GiB" + (
        "" if kv_memory else " (one request at max_model_len, lower bound)") + f" vs {limit / GIB:.1f} GiB ({where})"
    if weights > limit:
        return FAIL, f"the weights alone do not fit: {text}"
    if left < 0:
        return FAIL, f"no room for the KV cache vLLM requires: {text}"
    if left < MARGIN * gpu.memory_bytes:
        return UNKNOWN, f"too close to call (activations and CUDA graphs are not modelled): {text}"
    return PASS, f"{text}; {left / GIB:.1f} GiB to spare"


def memory_utilization(cache) -> float:
    """The GPU memory fraction vLLM sizes with: 0.34.0 resolves an unset one from its sizing mode, older
    releases (the CPU test base) keep the field itself."""
    return getattr(cache, "resolved_gpu_memory_utilization", cache.gpu_memory_utilization)


def billions(count: int) -> str:
    return f"{count / 1e9:.1f}B" if count >= 1e9 else f"{count / 1e6:.1f}M"


def _with_defaults(raw: dict, resolved) -> dict:
    """The checkpoint's own config.json over the config transformers resolved (which fills its defaults in)."""
    try:
        base = resolved.to_dict()
    except (AttributeError, TypeError, ValueError):  # a config object without a plain dict form
        base = {}
    # transformers' standard names (hidden_size, num_hidden_layers, ...) for a config that stores its own (GPT-2's
    # n_embd, n_layer, ...): to_dict() keeps only the latter.
    for standard in getattr(resolved, "attribute_map", {}):
        base.setdefault(standard, getattr(resolved, standard, None))
    merged = {**base, **raw}
    for key, section in raw.items():  # a multimodal text_config keeps the defaults resolved under it too
        if isinstance(section, dict) and isinstance(base.get(key), dict):
            merged[key] = {**base[key], **section}
    return merged


def _count(raw: dict, target: dict) -> P.Params:
    """params.py's count; where its formulas do not know the config's fields, the model class's own shapes."""
    from vllm._fork.spec_check import meta_params

    try:
        return P.count(target)
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        try:
            return meta_params.count(raw)
        except meta_params.NoClass as why:
            raise CannotTell(f"cannot size the weights from config.json ({type(exc).__name__}: {exc}; "
                             f"transformers' class: {why})") from None


def finding(target: dict, draft: dict | None, vllm_config, gpu: Gpu) -> Finding:
    """The weights-fit check for one deployment (the configs already passed vLLM's own construction)."""
    model, parallel, cache = vllm_config.model_config, vllm_config.parallel_config, vllm_config.cache_config
    spec = vllm_config.speculative_config
    raw_target, target = target, _with_defaults(target, model.hf_config)
    if draft is not None and spec is not None and spec.draft_model_config is not None:
        draft = _with_defaults(draft, spec.draft_model_config.hf_text_config)
    tp, pp = parallel.tensor_parallel_size, parallel.pipeline_parallel_size
    ep_size = tp * parallel.data_parallel_size if parallel.enable_expert_parallel else tp
    dtype_bytes = model.dtype.itemsize
    try:
        quant = quantization(target, dtype_bytes)
        counted = _count(raw_target, target)
        weights = bytes_per_rank(counted, quant, tp, pp, ep_size)
        draft_note = ""
        if spec is not None and spec.method == "mtp" and spec.num_speculative_tokens:
            layers = getattr(spec.draft_model_config.hf_config, "n_predict", None) or 1
            weights += bytes_per_rank(P.mtp_layers_params(target, layers), quant, tp, 1, ep_size)
            draft_note = f" + {layers} MTP layer(s)"
        elif draft is not None:
            draft_params = P.eagle_draft_params(draft, P._text(target)["hidden_size"])
            draft_quant = quantization(draft, spec.draft_model_config.dtype.itemsize)
            weights += bytes_per_rank(draft_params, draft_quant, tp, 1, tp)
            draft_note = f" + draft {billions(draft_params.total)}"
        kv_bytes = dtype_bytes if cache.cache_dtype in ("auto", None) else 1 if "fp8" in str(cache.cache_dtype) else 2
        kv = kv_bytes_per_token(target, tp, kv_bytes, model.max_model_len, pp) * model.max_model_len
    except (KeyError, TypeError, ZeroDivisionError) as exc:  # a field the count needs is missing or malformed
        raise CannotTell(f"cannot size the weights from config.json ({type(exc).__name__}: {exc})") from None
    status, reason = fit(gpu, memory_utilization(cache), cache.kv_cache_memory_bytes, weights, kv)
    counted_by = " (model class on meta)" if counted.notes else ""
    size = f"{billions(counted.total)} params{counted_by}{draft_note}, {quant.name}, TP={tp} PP={pp}" + (
        f" EP={ep_size}" if parallel.enable_expert_parallel else "")
    fix = "" if status == PASS else ("use more GPUs (--tensor-parallel-size, --pipeline-parallel-size), a GPU with "
                                     "more memory, a quantized checkpoint, or a shorter --max-model-len")
    return Finding(NAME, status, f"{size}: {reason}", fix)


def safe_finding(target: dict, draft: dict | None, vllm_config, gpu: Gpu) -> Finding:
    """finding(), with what the config does not say reported as "cannot tell"."""
    try:
        return finding(target, draft, vllm_config, gpu)
    except CannotTell as exc:
        return Finding(NAME, UNKNOWN, str(exc), "check the memory on a GPU host (the KV plan there is exact)")
