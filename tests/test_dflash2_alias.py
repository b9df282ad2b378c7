"""The fork's method "dflash2": a DFlash2 draft runs under method "dflash"."""

import json

import pytest

from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.worker.gpu.spec_decode.dflash2.config import DFlash2SpeculatorConfig

from fork_testing import TINY_DECODER

TARGET = TINY_DECODER | {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "head_dim": 32}
DFLASH_CONFIG = {
    "target_layer_ids": [0, 2],
    "mask_token_id": 3,
    "conv_kernel_size": 4,
    "conv_group_size": 8,
}


def _checkpoint(path, **config) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def _draft(path, architecture: str) -> str:
    draft = TARGET | {
        "num_hidden_layers": 2,
        "architectures": [architecture],
        "block_size": 8,
        "dflash_config": DFLASH_CONFIG,
    }
    return _checkpoint(path, **draft)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> ModelConfig:
    path = _checkpoint(tmp_path_factory.mktemp("target") / "model", **TARGET)
    return ModelConfig(model=path, skip_tokenizer_init=True, max_model_len=1024)


def _spec(target: ModelConfig, draft: str) -> SpeculativeConfig | None:
    args = EngineArgs(
        model=target.model,
        speculative_config={
            "method": "dflash2",
            "model": draft,
            "num_speculative_tokens": 4,
        },
    )
    return args.create_speculative_config(target, ParallelConfig())


@pytest.mark.parametrize("architecture", ["DFlash2DraftModel", "DFlash2BeamDraftModel"])
def test_dflash2_runs_under_dflash(target, tmp_path, architecture):
    spec = _spec(target, _draft(tmp_path / "draft", architecture))
    assert spec is not None and spec.method == "dflash"
    assert spec.draft_model_config is not None
    assert spec.draft_model_config.architectures == [architecture]
    assert isinstance(spec.speculator_config, DFlash2SpeculatorConfig)


def test_dflash2_with_a_dflash1_draft_says_what_to_use(target, tmp_path):
    with pytest.raises(ValueError) as refused:
        _spec(target, _draft(tmp_path / "draft", "DFlashDraftModel"))
    assert "use method 'dflash' for this checkpoint" in str(refused.value)
