# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A GLM-5.3-Flash MTP draft with several layers takes the multi-module path."""

from transformers import Glm5NextConfig

from vllm.config import SpeculativeConfig


def _nested_checkpoint(**text_fields: object) -> Glm5NextConfig:
    """A checkpoint's config.json with its text fields under text_config."""
    return Glm5NextConfig.from_dict(
        {
            "architectures": ["Glm5NextForConditionalGeneration"],
            "text_config": {"num_nextn_predict_layers": 2, **text_fields},
        }
    )


def test_nested_checkpoint_keeps_its_mtp_layer_count():
    draft = SpeculativeConfig.hf_config_override(_nested_checkpoint())
    assert draft.model_type == "glm5_next_mtp"
    assert draft.n_predict == 2
    # use_multi_module_mtp() and the multi-module speculator read this field
    # from the draft's top-level config.
    assert draft.num_nextn_predict_layers == 2


def test_index_sharing_checkpoint_keeps_the_single_module_path():
    config = _nested_checkpoint(index_share_for_mtp_iteration=True)
    draft = SpeculativeConfig.hf_config_override(config)
    assert draft.index_share_for_mtp_iteration
    assert not hasattr(draft, "num_nextn_predict_layers")
