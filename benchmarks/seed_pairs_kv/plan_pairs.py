"""Plan the KV cache of each scenario of one GPU in this process: `plan_pairs.py LIBCUDA GPU SCENARIOS.json OUT.json`.

Run by kv_pairs.py, one process per GPU (the stand-in SM90 platform of benchmarks/glm5_kv/sm90_stub.py never leaks
between GPUs). Each scenario is built as `vllm serve` builds it (EngineArgs.create_engine_config, the API server's
defaults) and planned by
spec-check's KV plan (vllm/_fork/spec_check/kv_plan.py): target and draft on the meta device, the platform's block
size, then the engine's own EngineCore._initialize_kv_caches, at a stated KV budget per rank.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "glm5_kv"))

import sm90_stub  # noqa: E402  (no vllm import may precede sm90_stub.install)

GIB = 1 << 30
# The corpus's Qwen3-Coder-Next config leaves max_position_embeddings out (no source quotes it), so transformers'
# default would cap it below the 128k every pair plans; the published model serves 262,144 tokens.
os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"


def use_planner(which: str) -> None:
    """'stock' plans exactly as stock vLLM (the fork's own switches off); 'fork' opts into its KV changes."""
    from vllm._fork.kv_pages import DISABLE_ENV, POOLS_ENV

    os.environ[DISABLE_ENV] = "1" if which == "stock" else "0"
    os.environ[POOLS_ENV] = "off" if which == "stock" else "on"


def project_recoverssm(config) -> None:
    """What --use-replayssm would plan on a target no RecoverSSM exists for (Qwen3-Next's GDN; Kimi-K3's row checks
    the projection against the real flag): the target said to take it and the flag set after validation, so its
    recurrent layers' specs (MambaBase.get_kv_cache_spec) ask for no state block per draft position. The validator
    runs again with a backend it accepts: triton where it gives RecoverSSM (the KDA architectures), else FlashInfer's
    Mamba2 ReplaySSM. The recurrent pages stay those planned without the flag (README.md)."""
    from vllm.config.mamba import MambaBackendEnum
    from vllm.config.model import ModelConfig
    from vllm.config.vllm import VllmConfig

    ModelConfig.supports_replayssm = property(lambda self: True)
    config.cache_config.use_replayssm = True
    for backend in (MambaBackendEnum.TRITON, MambaBackendEnum.FLASHINFER):
        config.mamba_config.backend = backend
        try:
            VllmConfig.validate_mamba_cached_kernel(config)
            return
        except ValueError:
            continue
    raise ValueError("no Mamba backend passes vLLM's --use-replayssm validation for this target")


def plan_one(scenario: dict) -> dict:
    """One scenario's plan: the totals and, per request length, the groups of spec-check's report."""
    from vllm._fork.spec_check.kv_plan import plan
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    use_planner(scenario["planner"])
    engine_args = EngineArgs(model=scenario["model"], skip_tokenizer_init=True, load_format="dummy",
                             tensor_parallel_size=8, speculative_config=scenario["spec"],
                             kv_cache_dtype=scenario["kv"], **scenario["flags"])
    # vllm serve's defaults (1024 sequences on H100/H200), which size RecoverSSM's verify records.
    config = engine_args.create_engine_config(UsageContext.OPENAI_API_SERVER)
    if scenario.get("project_recoverssm"):
        project_recoverssm(config)
    # RecoverSSM's verify records are allocated with the model, outside the KV cache: they come out of the budget.
    result = plan(config, int(scenario["budget_gib"] * GIB), records_from_budget=True)
    return {"ok": True, "verify_records": result["verify_records"],
            "max_num_seqs": config.scheduler_config.max_num_seqs, "block_size": result["block_size"],
            "groups": result["groups"],
            "num_blocks": result["blocks"], "max_model_len": result["max_model_len"],
            "requests": [b.as_dict() for b in result["breakdowns"]]}


def main() -> None:
    libcuda, gpu, scenarios, out = sys.argv[1:5]
    sm90_stub.install(gpu, Path(libcuda))
    results = {}
    for name, scenario in json.loads(Path(scenarios).read_text()).items():
        try:
            results[name] = plan_one(scenario)
        except Exception as exc:  # a scenario vLLM refuses is a result, printed verbatim
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                             "traceback": traceback.format_exc()[-3000:]}
    Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
