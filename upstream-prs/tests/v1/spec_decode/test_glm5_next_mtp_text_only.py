# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A text-only GLM-5.3-Flash checkpoint gets the MTP draft, planned as MLA."""

from transformers import PreTrainedConfig

from vllm.config import SpeculativeConfig
from vllm.transformers_utils.model_arch_config_convertor import (
    ModelArchConfigConvertorBase,
)


def _text_only_config() -> PreTrainedConfig:
    config = PreTrainedConfig(
        architectures=["Glm5NextForCausalLM"],
        num_nextn_predict_layers=1,
        kv_lora_rank=64,
    )
    config.model_type = "glm5_next_text"
    return config


def test_text_only_checkpoint_becomes_the_mtp_draft():
    draft = SpeculativeConfig.hf_config_override(_text_only_config())
    assert draft.model_type == "glm5_next_mtp"
    assert draft.architectures == ["Glm5NextMTPModel"]
    assert draft.n_predict == 1


def test_mtp_draft_is_mla():
    # The rewrite renames the top-level (text) config of a text-only checkpoint.
    draft = _text_only_config()
    draft.model_type = "glm5_next_mtp"
    assert ModelArchConfigConvertorBase(draft, draft).is_deepseek_mla()
