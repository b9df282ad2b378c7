"""Combinations that start and then misbehave or die, each rule read from vLLM's own code (cited per rule)."""

from __future__ import annotations

import copy
from typing import Any

from vllm._fork.spec_check.findings import FAIL, INFO, PASS, UNKNOWN, WARN, Finding
from vllm._fork.vocabulary import CheckName

AUX, CONNECTOR, TURBOQUANT = CheckName.AUX_LAYERS, CheckName.KV_CONNECTOR, CheckName.TURBOQUANT


def default_aux_layers(num_layers: int) -> Finding:
    """No ids for get_eagle3_aux_layers_from_config (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py), so
    set_eagle3_aux_hidden_state_layers takes SupportsEagle3.get_eagle3_default_aux_hidden_state_layers
    (model_executor/models/interfaces.py): (2, L/2, L-3)."""
    default = [2, num_layers // 2, num_layers - 3]
    return Finding(AUX, WARN, f"the draft names no target layers (eagle_aux_hidden_state_layer_ids), so it reads "
                   f"the target's default (usually {default} of {num_layers}): a head trained on other layers "
                   "accepts about 1 % of its drafts there and runs slower than no speculation (vllm#50170)",
                   "add eagle_aux_hidden_state_layer_ids to the draft's config.json: the layers the head was "
                   "trained on (its model card or training recipe; SafeAILab's EAGLE3 heads used these defaults)")


def turboquant(vllm_config: Any) -> Finding | None:
    """TurboQuantMetadataBuilder.get_cudagraph_support (v1/attention/backends/turboquant_attn.py), resolved by
    CompilationConfig.resolve_cudagraph_mode_and_sizes (config/compilation.py) as runner V2 resolves it: with
    UNIFORM_BATCH, verify batches (1 + k tokens per request) are FULL-captured, but the backend's forward sends
    every batch with max_query_len > 1 through a per-request prefill loop over host metadata (vllm#53406)."""
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.attention.backends.turboquant_attn import TurboQuantAttentionBackend, TurboQuantMetadataBuilder

    dtype = str(vllm_config.cache_config.cache_dtype)
    if not dtype.startswith("turboquant") or vllm_config.speculative_config is None:
        return None
    support = TurboQuantMetadataBuilder.get_cudagraph_support(vllm_config, None)
    query = vllm_config.uniform_decode_query_len
    mode = copy.deepcopy(vllm_config.compilation_config).resolve_cudagraph_mode_and_sizes(
        support, TurboQuantAttentionBackend.get_name(), uniform_decode_query_len=query)
    if mode.decode_mode() == CUDAGraphMode.FULL and query > 1:
        return Finding(TURBOQUANT, FAIL, f"--kv-cache-dtype {dtype} with speculative decoding: verify batches ({query} "
                       "tokens per request) are FULL-captured through TurboQuant's per-request prefill path, which "
                       "replays the capture's lengths: the engine serves degenerate output while health, logs and "
                       "metrics look normal (vllm#52475, vllm#53180)",
                       "add --enforce-eager or -cc.cudagraph_mode=PIECEWISE, or use --kv-cache-dtype fp8")
    return Finding(TURBOQUANT, INFO, f"--kv-cache-dtype {dtype} with speculative decoding: TurboQuant reports "
                   f"{support.name} CUDA graph support while speculating, so verify batches are not FULL-captured "
                   "and their attention runs eagerly (vllm#53406); decode is slower than with fp8 KV (vllm#53410)")


def _offload_sizes_from_target(vllm_config: Any, tokens: int) -> bool:
    """Whether this build's build_offloading_config accepts `block_size` with a draft group of another block
    size: a target group of `tokens` per block and an EAGLE draft group of half, as the planner marks it."""
    import torch
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import build_offloading_config
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    def group(name: str, block: int, draft: bool) -> KVCacheGroupSpec:
        spec = FullAttentionSpec(block_size=block, num_kv_heads=1, head_size=64, dtype=torch.bfloat16)
        return KVCacheGroupSpec([name], spec, is_eagle_group=draft)

    probe = KVCacheConfig(num_blocks=0, kv_cache_tensors=[],
                          kv_cache_groups=[group("target", tokens, False), group("draft", tokens // 2, True)])
    try:
        build_offloading_config(vllm_config, probe)
    except (AssertionError, ValueError):
        return False
    return True


def _plain_page(model_config: Any, parallel_config: Any) -> int | None:
    """KV bytes per token of one attention layer of a model made of full-attention layers only, None otherwise:
    unify_kv_cache_spec_page_size gives layers of equal pages the same block size."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    kinds = set(getattr(model_config.hf_text_config, "layer_types", None) or ["full_attention"])
    if model_config.use_mla or kinds != {"full_attention"} or model_config.get_sliding_window():
        return None
    dtype = model_config.dtype if isinstance(model_config.dtype, torch.dtype) else torch.bfloat16
    return FullAttentionSpec(block_size=1, num_kv_heads=model_config.get_num_kv_heads(parallel_config),
                             head_size=model_config.get_head_size(), dtype=dtype).page_size_bytes


def kv_connector(vllm_config: Any) -> Finding | None:
    """build_offloading_config (distributed/kv_transfer/kv_connector/v1/offloading/config.py) turns `block_size`
    (tokens per chunk) into blocks with one block size; the draft's group gets its own from
    unify_kv_cache_spec_page_size (v1/core/kv_cache_planning.py), and only get_global_kv_cache_groups' is_eagle_group
    (EAGLE, EAGLE3, MTP: SpeculativeConfig.use_eagle_block_drop) tells it apart (vllm#48919). NIXL moves blocks by
    each group's block size, so prefill and decode instances must plan alike."""
    transfer, spec = vllm_config.kv_transfer_config, vllm_config.speculative_config
    if transfer is None or spec is None:
        return None
    connector = str(transfer.kv_connector or "")
    tokens = (transfer.kv_connector_extra_config or {}).get("block_size")
    if "Offloading" in connector and tokens is not None:
        fix = "set 'blocks_per_chunk' instead of 'block_size' in kv_connector_extra_config"
        if not _offload_sizes_from_target(vllm_config, int(tokens)):
            return Finding(CONNECTOR, UNKNOWN, f"{connector} with 'block_size' {tokens}: this build needs one block "
                           "size over every offloaded KV group; if the draft's group gets another one (its page size "
                           "differs), every worker stops at connector init (vllm#48919)", fix)
        if not spec.use_eagle_block_drop():
            target = _plain_page(vllm_config.model_config, vllm_config.parallel_config)
            draft = _plain_page(spec.draft_model_config, spec.draft_parallel_config or vllm_config.parallel_config)
            if target is not None and target == draft:
                return Finding(CONNECTOR, PASS, f"{connector} with 'block_size' {tokens}: target and {spec.method} "
                               f"draft are plain attention with the same KV bytes per token ({target}), so they "
                               "share one block size")
            return Finding(CONNECTOR, UNKNOWN, f"{connector} with 'block_size' {tokens}: the {spec.method} draft's KV "
                           "group carries no draft marker; if its page, and so its block size, differs from the "
                           "target's, every worker stops at connector init, naming blocks_per_chunk (vllm#48919)", fix)
        return Finding(CONNECTOR, PASS, f"{connector} with 'block_size' {tokens}: this build sizes the offload chunk "
                       f"from the target's KV groups; the {spec.method} draft's group may have another block size "
                       "(vllm#48919)")
    if "Nixl" in connector:
        return Finding(CONNECTOR, INFO, f"{connector} moves KV blocks by each group's block size: prefill and decode "
                       "instances need the same --block-size, --kv-cache-dtype, prefix-caching setting and draft "
                       "(this build never packs draft KV groups when a connector is set)")
    return None


def findings(vllm_config: Any) -> list[Finding]:
    """Every combination rule that applies to this config."""
    found = [turboquant(vllm_config), kv_connector(vllm_config)]
    return [f for f in found if f is not None]
