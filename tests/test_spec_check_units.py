"""spec-check's pieces on their own, against the installed fork's real tables (no subprocess, no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm._fork.spec_check import checks, tables
from vllm._fork.spec_check.findings import FAIL, PASS, UNKNOWN, WARN, BadInput
from vllm._fork.spec_check.gpus import GPUS
from vllm._fork.spec_check.inputs import config_folder, speculative_dict

H100, MI300X = GPUS["h100"], GPUS["mi300x"]


@pytest.mark.parametrize("arch, gpu, text_archs, status, phrase", [
    ("Qwen3NextForCausalLM", H100, [], PASS, "Qwen3NextModel records aux hidden states"),
    ("KimiLinearForCausalLM", MI300X, [], PASS, "kimi_k3.amd.linear.KimiLinearForCausalLM declares"),
    ("MiMoForCausalLM", H100, [], PASS, "MiMoModel records aux hidden states"),  # refused before the fork captured
    ("Qwen4ExpForConditionalGeneration", H100, [], PASS, "Qwen4ExpModel records aux hidden states"),
    ("MambaForCausalLM", H100, [], FAIL, "Mamba-1 layers (MambaMixer) keep one state per request"),
    # The language model comes from the checkpoint: decided by the text config's architecture.
    ("LlavaForConditionalGeneration", H100, ["LlamaForCausalLM"], PASS, "its language model LlamaForCausalLM"),
    ("LlavaForConditionalGeneration", H100, ["NoSuchForCausalLM"], UNKNOWN, "cannot tell from configs"),
    ("KimiVLForConditionalGeneration", H100, [], FAIL, "does not declare SupportsEagle3"),
    ("NoSuchForCausalLM", H100, [], UNKNOWN, "not in this build's audit table"),
])
def test_aux_contract_verdicts(arch, gpu, text_archs, status, phrase):
    finding = checks.aux_contract(arch, gpu, text_archs)
    assert (finding.status, phrase in finding.reason) == (status, True), finding


def test_platform_classes_follow_the_gpu_vendor():
    assert all(".amd." not in row.cls for row in tables.rows_for("KimiLinearForCausalLM", "nvidia"))
    assert all(".nvidia." not in row.cls for row in tables.rows_for("KimiLinearForCausalLM", "amd"))
    assert tables.rows_for("Qwen3NextForCausalLM", "amd") == tables.rows_for("Qwen3NextForCausalLM", "nvidia")


@pytest.mark.parametrize("layer_ids, status", [
    ((0, 4, 8), PASS),   # 8 == depth: the output of the last layer is recorded
    ((2, 9), FAIL),      # past the depth: never recorded
    ((-1, 3), FAIL),
    (None, WARN),        # the model's own default: starts, and a head trained elsewhere rejects its drafts
])
def test_aux_layer_ids_against_the_target_depth(layer_ids, status):
    [layers, hidden] = checks.aux_layers(layer_ids, 8, 256, 256)
    assert layers.status == status and hidden.status == PASS


CONFIGS = Path(__file__).parent / "corpus" / "configs"


def _published(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


def test_specforge_ids_under_eagle_config_plus_one_are_the_default_vllm_records():
    """SpecForge's DeepSeek-class draft lists [1, 29, 57] under eagle_config (SGLang numbers a layer's output);
    against DeepSeek-V3's 61 layers, plus one is vLLM's default (2, 30, 58): nothing to add."""
    nested = _published("DeepSeek-EAGLE3-draft")["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    depth = _published("DeepSeek-V3")["num_hidden_layers"]
    [layers] = checks.aux_layers(None, depth, 7168, None, nested)
    assert layers.status == PASS, layers.reason


def test_nested_ids_off_the_default_name_the_top_level_ids_to_add():
    [layers] = checks.aux_layers(None, 61, 7168, None, [1, 29, 56])
    assert layers.status == WARN and "[2, 30, 57]" in layers.fix
    [layers] = checks.aux_layers(None, 61, 7168, None, [1, 20, 40, 57])
    assert layers.status == FAIL and "[2, 21, 41, 58]" in layers.fix


def test_hidden_size_mismatch_fails_and_an_unknown_draft_size_is_not_reported():
    assert checks.aux_layers((1,), 8, 256, 512)[1].status == FAIL
    assert [f.check for f in checks.aux_layers((1,), 8, 256, None)] == ["aux layers"]


def test_architecture_names_the_release_that_introduced_it():
    registered = {"LlamaForCausalLM"}
    newer = checks.architecture({"architectures": ["Glm5NextForCausalLM"]}, "0.29.0", registered, "target")
    assert newer.status == FAIL and "first appears in vLLM 0.30.0" in newer.reason
    unknown = checks.architecture({"architectures": ["Glm6ForCausalLM"]}, "0.34.0+fork", registered, "target")
    assert unknown.status == FAIL and "nor of any release up to 0.34.0" in unknown.reason
    old = checks.architecture({"architectures": ["LlamaForCausalLM"]}, "0.33.0", registered, "target")
    assert old.status == PASS and "since 0.23.0 or earlier" in old.reason
    assert checks.architecture({}, "0.33.0", registered, "target").status == FAIL


def test_a_speculators_draft_is_matched_by_its_algorithm_not_its_class():
    dflash = {"speculators_model_type": "dflash", "architectures": ["DFlashSpeculator"]}
    assert checks.requested_method({"method": "dflash"}, {}, dflash) is None
    eagle3 = checks.requested_method({"method": "dflash"}, {}, {"speculators_model_type": "eagle3"})
    assert eagle3.status == FAIL and "a speculators checkpoint (eagle3)" in eagle3.reason
    assert "use method 'eagle3'" in eagle3.fix


@pytest.mark.parametrize("gpu, chosen, non_causal, status", [
    ("gb10", "FLASH_ATTN", True, UNKNOWN),  # the path vllm#50707 saw device-assert
    ("rtx-pro-6000", "FLASH_ATTN", True, UNKNOWN),  # SM120 runs the same FA2 kernel
    ("gb10", "FLASHINFER", True, PASS),
    ("gb10", "FLASH_ATTN", False, PASS),  # causal layers on FA2 are not what the report saw fail
    ("h100", "FLASH_ATTN", True, PASS),
    ("a100", "FLASH_ATTN", True, PASS),
])
def test_non_causal_draft_layers_on_fa2_on_sm12x_cannot_be_told(gpu, chosen, non_causal, status):
    import types

    from vllm._fork.spec_check.attention import draft_finding
    from vllm._fork.spec_check.backends import Selection

    layer = types.SimpleNamespace(head_size=128, use_mla=False, has_sliding_window=False, use_non_causal=non_causal)
    finding = draft_finding([Selection(layer, 32, chosen)], GPUS[gpu])
    assert (finding.status, chosen in finding.reason) == (status, True), finding
    assert ("vllm#50707" in finding.reason) == (status == UNKNOWN)


def test_config_folder_accepts_a_folder_or_a_config_file(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"architectures": ["X"]}))
    with config_folder(str(tmp_path / "ckpt"), "MODEL") as (folder, config):
        assert (folder, config) == (str(tmp_path / "ckpt"), {"architectures": ["X"]})
    loose = tmp_path / "draft.json"
    loose.write_text(json.dumps({"architectures": ["Y"]}))
    with config_folder(str(loose), "draft") as (folder, config):
        assert json.loads((tmp_path / folder / "config.json").read_text()) == config == {"architectures": ["Y"]}
    assert not (tmp_path / folder).exists()  # the temporary copy is gone afterwards


@pytest.mark.parametrize("make, phrase", [
    (lambda p: p / "missing", "is not a folder, a config file or a hub id"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "has no config.json"),
    (lambda p: (p / "list.json").write_text("[1]") and p / "list.json", "must hold a JSON object"),
    (lambda p: (p / "bad.json").write_text("{") and p / "bad.json", "is not valid JSON"),
    (lambda p: p / ("x" * 300), "cannot use"),
])
def test_config_folder_rejects_with_one_line(tmp_path, make, phrase):
    with pytest.raises(BadInput) as caught, config_folder(str(make(tmp_path)), "MODEL"):
        pass
    assert phrase in str(caught.value) and str(caught.value).startswith("MODEL: ")


@pytest.mark.parametrize("value, phrase", [
    (None, "required"), ([1], "expected a JSON object"), ({"num_speculative_tokens": 3}, "give 'method'"),
])
def test_speculative_config_must_name_a_method_or_a_model(value, phrase):
    with pytest.raises(BadInput, match=phrase):
        speculative_dict(value)
    assert speculative_dict({"method": "mtp"}) == {"method": "mtp"}


@pytest.mark.parametrize("argv, name", [
    ([], "h100"), (["--gpu", "b200"], "b200"), (["x", "--gpu=mi300x"], "mi300x"), (["--gpu"], "h100"),
])
def test_gpu_is_read_from_raw_argv_before_the_parser_exists(argv, name):
    from vllm._fork.spec_check.platform import requested_gpu

    assert requested_gpu(argv) == GPUS[name]


def test_stand_in_platform_answers_device_questions_without_claiming_cuda():
    from vllm._fork.spec_check.platform import stand_in_platform

    platform = stand_in_platform(GPUS["b200"])
    capability = platform.get_device_capability()
    assert (capability.major, capability.minor) == (10, 0) and platform.is_device_capability_family(100)
    assert platform.get_device_total_memory() == GPUS["b200"].memory_bytes
    assert platform.device_type == "cuda" and not platform.is_cuda() and not platform.is_unspecified()


def _plan_args():
    import types

    return types.SimpleNamespace(pipeline_parallel_size=1, kv_cache_memory_bytes=1 << 30, gpu_memory_utilization=0.9)


def _one_rank_config():
    import types

    return types.SimpleNamespace(parallel_config=types.SimpleNamespace(tensor_parallel_size=1))


def test_kv_plan_fails_only_when_the_planner_itself_refuses(monkeypatch):
    from vllm._fork.spec_check import kv_plan

    def refuse(*args):
        raise ValueError("To serve at least one request with max seq len (131072), 4.0 GiB KV cache is needed")

    for name, value in (("init_one_rank", lambda *a: None), ("release_one_rank", lambda: None),
                        ("_build_on_meta", lambda config: (0, 0)), ("plan_kv_caches", refuse)):
        monkeypatch.setattr(kv_plan, name, value)
    monkeypatch.setattr("vllm.v1.worker.gpu.attn_utils.get_kv_cache_spec", lambda config: {})
    monkeypatch.setattr("vllm.platforms.current_platform.update_block_size_for_backend", lambda config: None)
    [finding] = kv_plan.kv_plan_findings(_one_rank_config(), _plan_args(), stand_in=False)
    assert finding.status == FAIL and "max seq len (131072)" in finding.reason and "--max-model-len" in finding.fix


def test_a_layer_that_fails_to_build_is_not_reported_as_too_little_memory(monkeypatch):
    from vllm._fork.spec_check import kv_plan

    def refuse_config(config):
        raise ValueError("this layer does not support head_dim 96")

    for name, value in (("init_one_rank", lambda *a: None), ("release_one_rank", lambda: None),
                        ("_build_on_meta", refuse_config)):
        monkeypatch.setattr(kv_plan, name, value)
    with pytest.raises(ValueError, match="head_dim 96"):  # run.py's own_faults names the check: exit 3
        kv_plan.kv_plan_findings(_one_rank_config(), _plan_args(), stand_in=False)


def test_cache_hint_names_the_hub_cli_that_ships_today(tmp_path, monkeypatch):
    """huggingface_hub 1.x ships `hf`, not `huggingface-cli`."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(BadInput) as caught, config_folder("org/not-cached", "MODEL"):
        pass
    assert "`hf download org/not-cached config.json`" in str(caught.value)
