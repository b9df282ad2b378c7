# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A GLM-5.3-Flash MTP draft with several layers takes the multi-module path."""

from transformers import PreTrainedConfig

from vllm.config import SpeculativeConfig


def test_nested_checkpoint_keeps_its_mtp_layer_count():
    config = PreTrainedConfig(
        architectures=["Glm5NextForConditionalGeneration"],
        text_config=PreTrainedConfig(num_nextn_predict_layers=2),
    )
    config.model_type = "glm5_next"
    draft = SpeculativeConfig.hf_config_override(config)
    assert draft.model_type == "glm5_next_mtp"
    assert draft.n_predict == 2
    # use_multi_module_mtp() and the multi-module speculator read this field
    # from the draft's top-level config.
    assert draft.num_nextn_predict_layers == 2


def test_index_sharing_checkpoint_keeps_the_single_module_path():
    config = PreTrainedConfig(
        architectures=["Glm5NextForConditionalGeneration"],
        text_config=PreTrainedConfig(
            num_nextn_predict_layers=2, index_share_for_mtp_iteration=True
        ),
    )
    config.model_type = "glm5_next"
    draft = SpeculativeConfig.hf_config_override(config)
    assert draft.index_share_for_mtp_iteration
    assert not hasattr(draft, "num_nextn_predict_layers")
