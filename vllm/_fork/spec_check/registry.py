"""The checks that read the engine config vLLM built, as typed entries run by one pipeline in their declared order.

Each entry names its check (a `CheckName`), the vLLM source its rule is read from, when it applies, and whether a
failure ends the pipeline (later checks would read a draft vLLM never gets to use). The checks before the engine
config (inputs, architectures, method vs checkpoint) and the KV plan after it are run.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from vllm._fork.spec_check import (attention, checks, combinations, contents, legality, parallel, weights,
                                   worker_checks)
from vllm._fork.spec_check.findings import FAIL, Finding, own_faults
from vllm._fork.spec_check.gpus import GPUS, Gpu
from vllm._fork.vocabulary import CheckName


@dataclass
class Deployment:
    """One invocation's built engine config and the checkpoint configs it came from."""

    args: Any
    vllm_config: Any
    target: dict
    draft: dict | None
    requested: str  # the method as the user gave it (checks.DETECTED when left to the draft)
    stand_in: bool  # a host without the GPU: spec-check's config-only platform answers for it

    @property
    def gpu(self) -> Gpu:
        return GPUS[self.args.gpu]

    @property
    def spec(self) -> Any:
        return self.vllm_config.speculative_config

    @property
    def tp(self) -> int:
        return self.vllm_config.parallel_config.tensor_parallel_size

    @cached_property
    def alternative(self) -> str:
        return checks.alternatives(checks.mtp_layers(self.target))


Result = Finding | list[Finding] | None


@dataclass(frozen=True)
class Check:
    """One check: its name, the rule's source in vLLM 0.34.0, what it runs, and when."""

    name: CheckName | str
    source: str
    run: Callable[[Deployment], Result]
    applies: Callable[[Deployment], bool] = lambda d: True
    final: bool = False  # a failure here ends the pipeline


def _aux_layers(d: Deployment) -> Result:
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

    model_config, draft_config = d.vllm_config.model_config, d.spec.draft_model_config
    draft_text = draft_config.hf_text_config
    draft_width = getattr(draft_text, "target_hidden_size", None) or getattr(draft_text, "hidden_size", None)
    nested = getattr(draft_config.hf_config, "eagle_config", None) or {}
    return checks.aux_layers(get_eagle3_aux_layers_from_config(d.spec), model_config.hf_text_config.num_hidden_layers,
                             model_config.get_hidden_size(), draft_width,
                             nested.get("eagle_aux_hidden_state_layer_ids") if isinstance(nested, dict) else None)


def _needs_aux(d: Deployment) -> bool:
    from vllm._fork.eagle3 import needs_aux_hidden_states

    return needs_aux_hidden_states(d.spec)


def _text_architectures(model_config: Any) -> list[str]:
    text = getattr(model_config.hf_config, "text_config", None)
    return list(getattr(text, "architectures", None) or [])


def _drafted(d: Deployment) -> bool:
    return d.spec.method != "mtp" and d.spec.draft_model_config is not None


CHECKS: tuple[Check, ...] = (
    Check(CheckName.SPECULATIVE_CONFIG, "v1/worker/gpu/spec_decode/mtp/config.py MTPSpeculatorConfig.matches",
          lambda d: legality.mtp_without_mtp_model(d.spec), final=True),
    Check(CheckName.SPECULATOR, "v1/worker/gpu/spec_decode/__init__.py init_speculator",
          lambda d: checks.speculator(d.spec, d.requested)),
    Check(CheckName.STANDALONE_DRAFT, "v1/worker/gpu/spec_decode/standalone_ar/speculator.py _run_model",
          lambda d: legality.standalone_draft(d.spec, checks.speculator_name(d.spec))),
    Check(CheckName.DRAFT_TENSOR_PARALLEL, "v1/worker/gpu/spec_decode/eagle/utils.py (the target's TP group)",
          lambda d: parallel.draft_heads(d.spec, d.tp)),
    Check(CheckName.EAGLE3_CONTRACT, "the build's audit table (vllm/_fork/_contract.py)",
          lambda d: checks.aux_contract(d.vllm_config.model_config.architecture, d.gpu,
                                        _text_architectures(d.vllm_config.model_config), d.alternative,
                                        d.spec.method, d.spec.kv_cache_dtype), _needs_aux),
    Check(CheckName.AUX_LAYERS, "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config",
          _aux_layers, _needs_aux),
    Check(CheckName.PIPELINE_PARALLEL, "eagle3_utils.verify_supports_aux_hidden_states_over_pp",
          lambda d: parallel.pipeline(d.vllm_config.model_config.architecture, d.gpu,
                                      d.vllm_config.parallel_config.pipeline_parallel_size, d.spec.method,
                                      d.alternative), _needs_aux),
    Check(CheckName.TARGET_PARALLELISM, "config/parallel.py ParallelConfig.__post_init__",
          lambda d: parallel.node_fit(d.vllm_config.parallel_config, d.gpu, d.stand_in)),
    Check(CheckName.CONTEXT_PARALLEL, "the V2 runner's PCP checks (speculator_config.py)",
          lambda d: parallel.context(d.spec, d.vllm_config.parallel_config.prefill_context_parallel_size,
                                     d.vllm_config.parallel_config.decode_context_parallel_size)),
    Check(CheckName.DRAFT_PARALLELISM, "config/speculative.py draft_parallel_config",
          lambda d: parallel.draft_placement(d.spec, d.vllm_config.parallel_config.enable_expert_parallel, d.tp),
          lambda d: d.spec.draft_parallel_config is not None),
    Check(CheckName.TURBOQUANT, "docs/runtime-fixes.md (vllm#53406)", lambda d: combinations.turboquant(d.vllm_config)),
    Check(CheckName.KV_CONNECTOR, "docs/runtime-fixes.md (vllm#48919)",
          lambda d: combinations.kv_connector(d.vllm_config)),
    Check(CheckName.WEIGHTS_FIT, "vllm/_fork/spec_check/params.py, weights.py",
          lambda d: weights.safe_finding(d.target, d.draft, d.vllm_config, d.gpu)),
    Check(CheckName.TARGET_KV_HEADS, "model_executor/layers/linear.py QKVParallelLinear.__init__",
          lambda d: parallel.kv_heads(d.vllm_config.model_config, d.tp)),
    Check(CheckName.TARGET_ATTENTION, "v1/attention/selector.py get_attn_backend",
          lambda d: attention.target_finding(d.vllm_config, d.target, d.gpu, d.stand_in)),
    Check(CheckName.SPARSE_INDEXER, "utils/deep_gemm.py native_next_n_supported",
          lambda d: attention.indexer_finding(d.vllm_config, d.gpu, d.stand_in)),
    Check(CheckName.MTP_TENSORS, "the MTP class's get_spec_layer_idx_from_weight_name; its quantization config",
          lambda d: contents.mtp_findings(d.vllm_config, d.vllm_config.model_config.model),
          lambda d: d.spec.method == "mtp"),
    Check(CheckName.DRAFT_CLASS, "v1/worker/gpu/spec_decode/{eagle,dflash,dspark}/utils.py load_*_model",
          lambda d: worker_checks.draft_findings(d.vllm_config, d.draft or {}, d.gpu), _drafted),
)


def run_all(deployment: Deployment) -> list[Finding]:
    """Every check that applies, in the declared order; a spec-check fault names the check it happened in."""
    found: list[Finding] = []
    for check in CHECKS:
        if not check.applies(deployment):
            continue
        with own_faults(check.name):
            result = check.run(deployment)
        results = [result] if isinstance(result, Finding) else [f for f in result or [] if f is not None]
        found += results
        if check.final and any(f.status == FAIL for f in results):
            break
    return found
