"""What the start-up check does with its comparison (vllm/_fork/recoverssm_check.py): it compares once per shape on a
CUDA device, refuses to build the layer in one line when the paths disagree, and leaves meta (spec-check) and CPU
layers alone. The comparison itself runs on real kernels in tests/test_kda_recoverssm_glm.py; here it is replaced by
given results, and the layer is a stand-in carrying the attributes the check reads (no CUDA device here)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vllm._fork import recoverssm_check
from vllm._fork.recoverssm_check import Comparison, RecoverSSMCheckFailed, check_layer


def _layer(device: str, use_recoverssm: bool = True, heads: int = 8) -> SimpleNamespace:
    return SimpleNamespace(conv1d=SimpleNamespace(weight=SimpleNamespace(device=torch.device(device))),
                           use_recoverssm=use_recoverssm, local_num_heads=heads, head_dim=128, num_spec=7,
                           kda_lower_bound=-5.0, get_state_dtype=lambda: (torch.bfloat16, torch.float32),
                           model_config=SimpleNamespace(dtype=torch.bfloat16))


class _Calls(list):
    """Each compare() call's arguments; compare answers with `answer`."""

    answer = Comparison(output=0.0, state=1e-7, conv=0.0)

    def compare(self, *args, **kwargs) -> Comparison:
        self.append(args)
        return self.answer


@pytest.fixture
def comparisons(monkeypatch) -> _Calls:
    calls = _Calls()
    monkeypatch.setattr(recoverssm_check, "_PASSED", set())
    monkeypatch.setattr(recoverssm_check, "compare", calls.compare)
    return calls


def test_a_cuda_layer_is_compared_once_per_shape(comparisons):
    check_layer(_layer("cuda"))
    check_layer(_layer("cuda"))
    check_layer(_layer("cuda", heads=4))
    assert [call[1] for call in comparisons] == [8, 4]


def test_disagreeing_paths_refuse_the_layer_in_one_line_naming_the_flag(comparisons):
    comparisons.answer = Comparison(output=0.0, state=0.6, conv=0.2)
    with pytest.raises(RecoverSSMCheckFailed) as refused:
        check_layer(_layer("cuda"))
    message = str(refused.value)
    assert "\n" not in message and "--use-replayssm" in message
    assert "committed states by 0.6" in message and "convolution by 0.2" in message and "verify outputs" not in message


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_layers_off_cuda_are_not_compared(comparisons, device):
    check_layer(_layer(device))
    assert comparisons == []


def test_a_layer_without_recoverssm_is_not_compared(comparisons):
    check_layer(_layer("cuda", use_recoverssm=False))
    assert comparisons == []
