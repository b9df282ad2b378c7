"""vLLM's own constructors next to spec-check's rules (KV-head split, quantization ignore lists), on the stand-in.

    spec_check_worker_probe.py   -> prints one JSON object (read by tests/test_spec_check_workers.py)

A separate interpreter because the stand-in platform is process-wide once vLLM's modules have read it.
"""

from __future__ import annotations

import json
import types

from vllm._fork.spec_check.gpus import GPUS
from vllm._fork.spec_check.platform import install_if_unspecified

install_if_unspecified(GPUS["h100"])

import torch  # noqa: E402

from vllm._fork.spec_check import contents, parallel  # noqa: E402
from vllm._fork.spec_check.draft_build import one_rank  # noqa: E402


def kv_split() -> dict:
    """(total KV heads, TP) -> [QKVParallelLinear builds, the KV-head rule passes]."""
    from vllm.model_executor.layers.linear import QKVParallelLinear

    found = {}
    for kv in (1, 2, 4, 8, 16):
        for tp in (1, 2, 3, 4, 6, 8, 12, 16, 24, 48):  # all divide the 48 attention heads
            with one_rank(tp), torch.device("meta"):
                try:
                    QKVParallelLinear(128 * 48, 128, 48, kv, bias=False)
                    built = True
                except AssertionError:
                    built = False
            model = types.SimpleNamespace(use_mla=False, get_total_num_kv_heads=lambda kv=kv: kv)
            rule = parallel.kv_heads(model, tp)
            found[f"{kv},{tp}"] = [built, rule is None or rule.status == "pass"]
    return found


def quark_ignore() -> dict:
    """QuarkConfig's own get_quant_method on an MTP prefix, with and without an exclude entry for it."""
    from vllm.model_executor.layers.quantization.quark.quark import QuarkConfig

    from corpus_assembly import QUARK

    prefix = "model.layers.78.self_attn.q_a_proj"
    return {label: contents._quantized(QuarkConfig.from_config({**QUARK, "exclude": exclude}), prefix)
            for label, exclude in (("lm_head only", ["lm_head"]), ("MTP layer excluded", ["lm_head", "re:.*78.*"]))}


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "corpus"))
    sys.modules["corpus_assembly"] = __import__("assemble")
    from vllm.config import VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig()):
        print(json.dumps({"kv_split": kv_split(), "quark": quark_ignore()}))
