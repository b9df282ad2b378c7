"""What the workers build and load, checked without a GPU: checkpoint listings (index, safetensors headers), the
KV-head rule and the quantization ignore list against vLLM's own constructor and config class."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm._fork.spec_check import checkpoint
from vllm._fork.spec_check.worker_checks import _nested

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(Path(__file__).parent / "corpus"))

from assemble import header_only  # noqa: E402


@pytest.fixture(scope="module")
def probe() -> dict:
    """tests/scripts/spec_check_worker_probe.py in its own interpreter (the stand-in platform is process-wide)."""
    done = subprocess.run([sys.executable, str(SCRIPTS / "spec_check_worker_probe.py")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kv_head_rule_is_the_one_qkv_parallel_linear_asserts(probe):
    """Every (KV heads, TP) pair: the rule passes exactly where vLLM's QKVParallelLinear builds on rank 0."""
    pairs = probe["kv_split"]
    assert {(built, rule) for built, rule in pairs.values()} == {(True, True), (False, False)}, pairs
    assert pairs["8,6"] == [False, False] and pairs["8,16"] == [True, True] and pairs["2,3"] == [False, False]


def test_quark_builds_an_mtp_layer_quantized_unless_its_exclude_list_names_it(probe):
    """QuarkConfig's own get_quant_method: with exclude=[lm_head] layer 78 is quantized (vllm#49187)."""
    assert probe["quark"] == {"lm_head only": True, "MTP layer excluded": False}


def test_a_folder_lists_its_tensors_from_the_index_or_the_headers(tmp_path):
    assert checkpoint.tensors(tmp_path) is None  # config-only: nothing to read, the checks cannot tell
    header_only(tmp_path / "model.safetensors", {"fc.weight": [4, 8], "norm.weight": [4]}, "BF16")
    listing = checkpoint.tensors(tmp_path)
    assert listing.names == {"fc.weight", "norm.weight"} and listing.dtypes["fc.weight"] == "BF16"
    assert listing.shapes == {"fc.weight": [4, 8], "norm.weight": [4]}
    weight_map = {"fc.weight": "model.safetensors", "lm_head.weight": "model-2.safetensors"}
    (tmp_path / checkpoint.INDEX).write_text(json.dumps({"weight_map": weight_map}))
    listing = checkpoint.tensors(tmp_path)  # the index names all; the shard that is here gives dtypes
    assert listing.names == {"fc.weight", "lm_head.weight", "norm.weight"} and "1 of 2 shard headers" in listing.source
    assert "lm_head.weight" not in listing.dtypes


def test_a_header_is_read_without_the_weights(tmp_path):
    header_only(tmp_path / "w.safetensors", {"x": [1 << 20, 1 << 10]}, "BF16")  # 2 GiB declared, none written
    assert (tmp_path / "w.safetensors").stat().st_size < 200
    assert checkpoint.read_header(tmp_path / "w.safetensors")["x"]["shape"] == [1 << 20, 1 << 10]
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ValueError, match="not a safetensors file"):
        checkpoint.read_header(tmp_path / "bad.safetensors")


def test_a_field_found_below_the_top_level_is_named_for_the_fix():
    config = {"dflash_config": {"markov_rank": 8, "inner": {"deep": 1}}, "hidden_size": 4}
    assert _nested(config, "markov_rank") == "dflash_config"
    assert _nested(config, "deep") == "dflash_config.inner" and _nested(config, "absent") is None
