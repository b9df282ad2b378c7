# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A GLM-5.3-Flash MTP draft with several layers takes the multi-module path."""

from transformers import PretrainedConfig

from vllm.config import SpeculativeConfig


def test_nested_checkpoint_keeps_its_mtp_layer_count():
    config = PretrainedConfig(
        architectures=["Glm5NextForConditionalGeneration"],
        text_config=PretrainedConfig(num_nextn_predict_layers=2),
    )
    config.model_type = "glm5_next"
    draft = SpeculativeConfig.hf_config_override(config)
    assert draft.model_type == "glm5_next_mtp"
    assert draft.n_predict == 2
    # use_multi_module_mtp() and the multi-module speculator read this field
    # from the draft's top-level config.
    assert draft.num_nextn_predict_layers == 2
