"""Planning scenarios (GPU x KV dtype x drafter x planner) in a fresh process; writes a JSON result each.

Run by kv_capacity.py: one subprocess per GPU, so the platform stubs never leak; `--batch` plans several
scenarios of that GPU one after another, tearing the one-rank world down between them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sm90_stub  # noqa: E402  (no vllm import may precede sm90_stub.install)
from model_configs import DRAFT_DIR, TARGET_DIR  # noqa: E402

GIB = 1 << 30
# GLM-5.3-Flash FP8 checkpoint, split over TP8; stands in for the profiled weight memory.
TARGET_WEIGHTS_PER_RANK = 306 * GIB // 8
GPU_MEMORY_UTILIZATION = 0.9


def spec_bytes(specs: dict) -> dict:
    """Unpadded bytes straight from the layer specs, to cross-check the physical bound."""
    out = {"target_per_token": 0.0, "draft_per_token": 0.0, "kda_state": 0, "tail": 0}
    for spec in specs.values():
        kind = type(spec).__name__
        if kind == "MambaSpec":  # raw state, before page_size_padded
            out["kda_state"] += sum(math.prod(shape) * dtype.itemsize
                                    for shape, dtype in zip(spec.shapes, spec.dtypes))
        elif kind == "CircularBufferSpec":  # one ring per request
            out["tail"] += spec.page_size_bytes
        elif getattr(spec, "is_draft", False):
            out["draft_per_token"] += spec.page_size_bytes / spec.block_size
        else:
            out["target_per_token"] += spec.page_size_bytes / spec.block_size
    return out


def use_planner(which: str) -> None:
    """'stock': switch the fork's KV-planning changes (pools per page size, draft packing) off in this process."""
    import vllm.v1.core.kv_cache_planning as planning

    hooked = hasattr(planning, "plan_pool_groups")
    if which == "fork" and not hooked:
        raise RuntimeError("--planner fork needs the fork wheel (vllm.v1.core.kv_cache_planning has no "
                           "plan_pool_groups); install it, or pass --planner stock")
    if hooked:
        from vllm._fork.kv_pages import DISABLE_ENV, POOLS_ENV

        # The fork's own switches, read at planning time: "1" plans exactly as stock vLLM; fork rows opt in.
        os.environ[DISABLE_ENV] = "1" if which == "stock" else "0"
        os.environ[POOLS_ENV] = "off" if which == "stock" else "on"


def run(args, platform) -> dict:
    """Build config, layers and specs, then plan; return the numbers kv_capacity.py prints."""
    import vllm

    import planner

    # The stubs and the planner call sequence are written against 0.33.0's internals; 0.34.0 plans the same stock
    # groups through them (tests/test_glm5_kv_plan.py checks the stock numbers on each).
    if not vllm.__version__.startswith(("0.33.0", "0.34.0")):
        raise RuntimeError(f"needs vLLM 0.33.0 or 0.34.0 (the fork counts), found {vllm.__version__}")

    use_planner(args.planner)
    models = Path(args.models)
    from vllm._fork.kv_pages import pools_proven

    # Fork rows on a release the pools are not ported to keep stock's pools (only draft packing may apply).
    res = {"gpu": args.gpu, "kv": args.kv, "draft": args.draft, "prefix_caching": args.prefix_caching,
           "vllm": vllm.__version__, "pools_ported": pools_proven()}
    vc = planner.make_vllm_config(str(models / TARGET_DIR),
                                  str(models / DRAFT_DIR) if args.draft else None, args.kv, args.prefix_caching)
    res["cache_dtype"] = vc.cache_config.cache_dtype
    planner.init_fake_tp(vc)
    planner.build_target_attention(vc)
    draft_bytes = 0
    if args.draft:
        drafter = planner.build_drafter(vc)
        # The drafter's weights come out of the same per-rank budget as the KV pool.
        draft_bytes = sum(p.numel() * p.element_size() for p in drafter.parameters())
    specs = planner.collect_specs(platform, vc)
    res["spec_bytes"] = spec_bytes(specs)
    res["planner"] = args.planner
    total = sm90_stub.GPUS[args.gpu][1]
    available = int(GPU_MEMORY_UTILIZATION * total - TARGET_WEIGHTS_PER_RANK - draft_bytes)
    res.update(draft_param_bytes=draft_bytes, available_bytes=available)
    res.update(planner.plan(vc, specs, available, save=Path(args.out).with_suffix(".configs.pkl")))
    res["ok"] = True
    return res


def run_to_file(args, platform) -> None:
    """One scenario; a planning failure is a result, reported verbatim."""
    try:
        res = run(args, platform)
    except Exception as exc:
        res = {"gpu": args.gpu, "kv": args.kv, "draft": args.draft, "prefix_caching": args.prefix_caching, "ok": False,
               "planner": args.planner,
               "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        from vllm._fork.spec_check.kv_plan import release_one_rank

        release_one_rank()  # the next scenario of a batch starts its own one-rank world
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", choices=sorted(sm90_stub.GPUS), required=True)
    ap.add_argument("--kv", choices=["auto", "fp8"], required=True)
    ap.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false",
                    help="plan as `vllm serve --no-enable-prefix-caching` (KDA states leave align mode)")
    ap.add_argument("--draft", action="store_true")
    ap.add_argument("--planner", choices=["fork", "stock"], default="fork",
                    help="stock: plan as stock vLLM does (VLLM_FORK_DISABLE_KV_PACKING=1)")
    ap.add_argument("--models", required=True, help="folder written by model_configs.write")
    ap.add_argument("--libcuda", required=True, help="path to the built libcuda.so.1 stub")
    ap.add_argument("--out", help="where the result goes (each batch entry names its own)")
    ap.add_argument("--batch", type=Path, help="a JSON list of {draft, planner, prefix_caching, out}: plan each "
                    "with the other flags as given (one platform stub, one interpreter)")
    args = ap.parse_args()
    if not (args.out or args.batch):
        ap.error("give --out or --batch")
    platform = sm90_stub.install(args.gpu, args.libcuda)
    for change in json.loads(args.batch.read_text()) if args.batch else [{}]:
        run_to_file(argparse.Namespace(**{**vars(args), **change}), platform)


if __name__ == "__main__":
    main()
