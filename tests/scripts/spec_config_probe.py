"""Build vLLM engine configs for tiny local targets and report, as JSON, which speculative configs validate.

Usage: python spec_config_probe.py OUT_JSON ARCH:METHOD [ARCH:METHOD ...]
Each target is a 6-layer qwen2-shaped config.json whose architectures names ARCH; eagle3 gets a local
LlamaForCausalLMEagle3 drafter config, ngram none. No weights are needed: only config validation runs.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # without it the CUDA-less machine has no device string
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_platform  # noqa: E402

SHAPE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=512, max_position_embeddings=256, torch_dtype="float32")


def _write(folder: Path, config: dict) -> str:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _speculative(method: str, root: Path) -> dict:
    if method == "ngram":
        return {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}
    draft = _write(root / "draft", dict(SHAPE, model_type="llama", architectures=["LlamaForCausalLMEagle3"],
                                        num_hidden_layers=1, draft_vocab_size=512, target_hidden_size=64))
    return {"method": method, "model": draft, "num_speculative_tokens": 2}


def probe(arch: str, method: str) -> dict:
    from vllm.engine.arg_utils import EngineArgs

    with tempfile.TemporaryDirectory() as scratch:  # config-only folders, gone with the probe
        root = Path(scratch)
        target = _write(root / "target", dict(SHAPE, model_type="qwen2", architectures=[arch], num_hidden_layers=6))
        args = EngineArgs(model=target, skip_tokenizer_init=True, max_model_len=128,
                          speculative_config=_speculative(method, root))
        try:
            with cpu_platform.without_triton_cpu():
                args.create_engine_config()
        except Exception as exc:  # noqa: BLE001 - the probe reports whatever validation raises
            return {"accepted": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"accepted": True, "error": ""}


if __name__ == "__main__":
    results = {pair: probe(*pair.split(":")) for pair in sys.argv[2:]}
    Path(sys.argv[1]).write_text(json.dumps(results, indent=1))
