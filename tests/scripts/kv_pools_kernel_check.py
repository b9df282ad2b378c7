"""KV pools' kernel comparison (vllm/_fork/kv_pools_selftest.py) on plans the fork's own carver cuts, one line each.

Usage: python kv_pools_kernel_check.py [--device cuda|cpu] [--dtype float32|bfloat16] [--plant FAULT] [--only PLAN]
                                      [--backend TRITON_ATTN|FLASH_ATTN]
On a GPU host with the fork wheel installed it runs vLLM's Triton or FlashAttention kernels natively
(docs/kv-pools.md); on the CPU, Triton's under `CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1` (fp32: the interpreter's
bf16 dot gives garbage). `--plant` puts a fault into the real code first, to show the comparison catches it
(repeatable: each alone, in turn). The last line is JSON: per plan (per fault, then per plan, with --plant), the
findings.
Exit 0 every carved group matched, 1 a finding, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

import torch
from kv_pools_plants import PLANTS

from vllm._fork import kv_pools_plan, kv_pools_selftest
from vllm._fork.kv_pools_kernels import AttentionKernels
from vllm._fork.vocabulary import SelfTestStatus
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor,
                                        SlidingWindowSpec)
from vllm.v1.kv_cache_layout import KVCacheLayout

BLOCK, HEAD = 16, 64
BLOCKS = 64  # the plan's shared blocks (the self-test takes SHARED_BLOCKS of them)


def _full(heads: int, dtype: torch.dtype, **extra) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=BLOCK, num_kv_heads=heads, head_size=HEAD, dtype=dtype, **extra)


def _window(heads: int, dtype: torch.dtype, **extra) -> SlidingWindowSpec:
    return SlidingWindowSpec(block_size=BLOCK, num_kv_heads=heads, head_size=HEAD, dtype=dtype, sliding_window=6,
                             **extra)


def layer_outermost(narrow, wide) -> KVCacheConfig:
    """Two layers in regions of their own, the narrow one's pages padded to the wide one's (stock's plan)."""
    page = wide.page_size_bytes
    narrow = replace(narrow, page_size_padded=page)
    tensors = [KVCacheTensor(size=BLOCKS * page, layers=[name], layer_stride=BLOCKS * page, block_stride=page)
               for name in ("narrow", "wide")]
    groups = [KVCacheGroupSpec(["narrow"], narrow), KVCacheGroupSpec(["wide"], wide)]
    return KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=tensors, kv_cache_groups=groups)


def block_outermost(narrow, wide) -> KVCacheConfig:
    """Both layers' pages side by side in every block (stride: their sum)."""
    stride = narrow.page_size_bytes + wide.page_size_bytes
    tensors = [KVCacheTensor(size=BLOCKS * stride, layers=["narrow"], layer_stride=narrow.page_size_bytes,
                             block_stride=stride),
               KVCacheTensor(size=BLOCKS * stride, layers=["wide"], layer_stride=wide.page_size_bytes,
                             block_stride=stride, offset=narrow.page_size_bytes)]
    groups = [KVCacheGroupSpec(["narrow"], narrow), KVCacheGroupSpec(["wide"], wide)]
    return KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=tensors, kv_cache_groups=groups)


def plans(dtype: torch.dtype) -> dict:
    """Name: (stock config, layout); the carver makes 2, 2 and 3 slots of the narrow group."""
    return {"full-attention-layer-outermost": (layer_outermost(_full(2, dtype), _full(4, dtype)), KVCacheLayout.LBHNC),
            "sliding-window-layer-outermost": (layer_outermost(_window(2, dtype), _full(4, dtype)),
                                               KVCacheLayout.LBHNC),
            "sliding-window-block-outermost": (block_outermost(_window(2, dtype), _full(4, dtype)),
                                               KVCacheLayout.BLHNC)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--plant", choices=sorted(PLANTS), action="append", default=[],
                        help="repeatable: each fault alone, one after another, in this process")
    parser.add_argument("--only", help="one plan of plans() by name")
    parser.add_argument("--backend", choices=["TRITON_ATTN", "FLASH_ATTN"], default="TRITON_ATTN",
                        help="whose write and read kernels run on the slots (FLASH_ATTN: on a GPU only)")
    args = parser.parse_args(argv)
    if args.backend == "FLASH_ATTN" and torch.device(args.device).type != "cuda":
        parser.error("--backend FLASH_ATTN: FlashAttention's kernels run on a GPU only; use --device cuda there")
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no CUDA device here; on a CPU run with --device cpu under "
                     "CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1")
    cases = plans(getattr(torch, args.dtype))
    if args.only and args.only not in cases:
        parser.error(f"--only {args.only}: no such plan; choose from {', '.join(cases)}")
    cases = {name: case for name, case in cases.items() if not args.only or name == args.only}
    if not args.plant:
        results = _check(cases, torch.device(args.device), "", args.backend)
    else:  # keyed by the fault planted
        results = {}
        for plant in args.plant:
            with PLANTS[plant]():
                results[plant] = _check(cases, torch.device(args.device), f"{plant}: ", args.backend)
    print(json.dumps(results))
    runs = list(results.values()) if args.plant else [results]  # each: results by plan
    return 1 if any(r["findings"] for by_plan in runs for r in by_plan.values()) else 0


def _kernels(backend: str):
    """The self-test's kernels without a layer: `backend`'s write and read (FlashAttention at the version vLLM picks
    on this GPU)."""
    version = None
    if backend == "FLASH_ATTN":
        from vllm.v1.attention.backends.fa_utils import get_flash_attn_version

        version = get_flash_attn_version()
    return lambda group_id, spec: AttentionKernels(backend, spec, fa_version=version)


def _check(cases: dict, device: torch.device, prefix: str, backend: str) -> dict:
    """Each plan carved by the fork's carver and compared; one printed line per plan."""
    results = {}
    for name, (stock, layout) in cases.items():
        carved = kv_pools_plan.carve_kv_cache_config(stock, layout)
        checked = kv_pools_selftest.check_plan(stock, carved, layout, device, _kernels(backend))
        findings = [result.line() for result in checked if result.status is not SelfTestStatus.PASSED]
        results[name] = {"slots": list(carved.slots_per_block), "findings": findings}
        verdict = "; ".join(results[name]["findings"]) or "carved slot = stock block, bitwise"
        print(f"{prefix}{name}: slots {results[name]['slots']}: {verdict}", flush=True)
    return results


if __name__ == "__main__":
    if not torch.cuda.is_available():  # the interpreter host has no device to ask; SM90's tile choice
        torch.cuda.get_device_capability = lambda *args: (9, 0)
    sys.exit(main(sys.argv[1:]))
