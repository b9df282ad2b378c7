"""A text-only GLM-5.3-Flash checkpoint gets the MTP draft, planned as MLA."""

from transformers import Glm5NextTextConfig

from vllm.config import SpeculativeConfig
from vllm.transformers_utils.model_arch_config_convertor import (
    ModelArchConfigConvertorBase,
)


def _text_only_draft():
    """The rewrite of a flat checkpoint, whose top-level config is the text one."""
    config = Glm5NextTextConfig.from_dict(
        {
            "architectures": ["Glm5NextForCausalLM"],
            "num_nextn_predict_layers": 1,
            "kv_lora_rank": 64,
        }
    )
    return SpeculativeConfig.hf_config_override(config)


def test_text_only_checkpoint_becomes_the_mtp_draft():
    draft = _text_only_draft()
    assert draft.model_type == "glm5_next_mtp"
    assert draft.architectures == ["Glm5NextMTPModel"]
    assert draft.n_predict == 1


def test_mtp_draft_is_mla():
    draft = _text_only_draft()
    assert ModelArchConfigConvertorBase(draft, draft).is_deepseek_mla()
