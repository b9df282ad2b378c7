"""Each class the fork newly declares runs its real outer and decoder forward and hands out aux states.

The target is built without its __init__ (which needs a VllmConfig, weights and kernels): the outer class
and every module on the way to the decoder are the real classes the static audit resolves, wired as the
constructor would; only the decoder's layers and final norm are stand-ins whose outputs are predictable.
So what runs is the real outer forward, the real decoder forward (its capture loop included) and the
protocol's real setter.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from fork_testing import assert_aux_states, load_class, one_pipeline_rank, skeleton
from forktool.audit.contract import ContractReader
from forktool.audit.registry import REGISTRY_PATH, read_registry

HIDDEN, TOKENS, LAYERS = 8, 5, 6
CHOSEN = (1, 3, 5)


class CountingLayer(torch.nn.Module):
    """A decoder layer stand-in: adds one to the hidden stream, keeps the residual at zero."""

    def forward(self, *args, **kwargs):
        named = dict(zip(("positions", "hidden_states", "residual"), args)) | kwargs
        hidden, residual = named["hidden_states"], named.get("residual")
        return hidden + 1, torch.zeros_like(hidden) if residual is None else residual


class AddingNorm(torch.nn.Module):
    """The final norm stand-in: folds the residual in, like a fused add+norm, without scaling."""

    def forward(self, hidden, residual=None):
        if residual is None:
            return hidden
        return hidden + residual, hidden + residual


# Attributes some constructors set that the forward reads, with the value a plain checkpoint gets.
WIRING = {
    "Cosmos3EdgeTextModel": lambda: {"norm_f": AddingNorm()},  # NemotronH names its final norm norm_f
    "MossAudioModel": lambda: {"deepstack_input_embeds": None},  # no audio in a text-only step
    "KimiLinearForCausalLM": lambda: {"specialized_decode": None},  # the stock (not specialized) decode
    "KimiLinearModel": lambda: {"config": SimpleNamespace(attn_res_block_size=None)},  # no attention residuals
}


def _skeleton(cls):
    instance = skeleton(cls)
    instance.do_not_compile = True  # @support_torch_compile's __call__ reads it; run forward eagerly
    for name, value in WIRING.get(cls.__name__, dict)().items():
        setattr(instance, name, value)
    return instance


def _declared_by_fork(project) -> list[tuple[str, str]]:
    """(module, class) of every SupportsEagle3 declaration the installed fork applied (guards excluded)."""
    from vllm._fork import manifest

    applied = {(e["target"], e["id"]) for e in manifest()["edits"] if e["status"] == "clean"}
    from test_eagle3_capture_forward import CASES  # decoders the fork makes capture run there, per layer contract
    from test_eagle3_capture_forward_more import CASES as MORE_CASES  # the formerly refused targets
    from test_eagle3_capture_forward_outer import CASES as OUTER_CASES  # decoders outside .model (GPT-2, OPT, ...)

    captured = {case.outer for case in [*CASES, *MORE_CASES, *OUTER_CASES]}
    return sorted({(e.target[: -len(".py")].replace("/", "."), e.params["class"]) for e in project.edits()
                   if e.op == "add_base" and e.params["base"] == "SupportsEagle3" and (e.target, e.id) in applied
                   and f'{e.target[: -len(".py")].replace("/", ".")}.{e.params["class"]}' not in captured})


@pytest.fixture(scope="module")
def reader(fork_sources):
    tree = fork_sources.fork  # the session's assembly; its wheel stays open for the whole run
    registry = {e.arch: (e.module, e.cls) for e in read_registry(tree.read(REGISTRY_PATH))}
    return ContractReader(tree, registry)


def _build(reader: ContractReader, module: str, name: str):
    """The outer target with real intermediate modules down to a real decoder with stand-in layers."""
    [ref] = reader.tree.resolve(module, name)
    contract = reader.contract(ref)
    path, _, _ = contract.holder.partition(" -> ")
    outer = _skeleton(load_class(ref.key))
    parent, walked = outer, []
    for attr in path.split(".") if path != "self" else []:
        walked.append(attr)
        classes, why = reader.path_classes(ref, ".".join(walked))
        assert classes, why
        child = _skeleton(load_class(classes[0].key))
        setattr(parent, attr, child)
        parent = child
    decoder = parent
    decoder.layers = torch.nn.ModuleList(CountingLayer() for _ in range(LAYERS))
    decoder.start_layer, decoder.end_layer = 0, LAYERS
    decoder.norm = AddingNorm()
    return outer, decoder


@pytest.fixture(autouse=True)
def single_rank(monkeypatch):
    one_pipeline_rank(monkeypatch)


def pytest_generate_tests(metafunc):
    if "declared" in metafunc.fixturenames:
        from forktool.project import REPO_ROOT, Project

        pairs = _declared_by_fork(Project(REPO_ROOT))
        metafunc.parametrize("declared", pairs, ids=[name for _, name in pairs])


def test_newly_declared_class_returns_aux_states_from_its_real_forward(reader, declared):
    from vllm.model_executor.models.interfaces import supports_eagle3

    module, name = declared
    outer, decoder = _build(reader, module, name)
    assert supports_eagle3(outer)
    outer.set_aux_hidden_state_layers(CHOSEN)
    assert decoder.aux_hidden_state_layers == CHOSEN
    embeds = torch.randn(TOKENS, HIDDEN)
    positions = torch.arange(TOKENS)
    with torch.no_grad():
        out = outer.forward(input_ids=None, positions=positions, inputs_embeds=embeds)
    # The state after layer L is the input plus L: the decoder recorded exactly the chosen layers.
    assert_aux_states(out, CHOSEN, LAYERS, lambda layer: embeds + layer, name)
    assert outer.get_eagle3_default_aux_hidden_state_layers() == (2, LAYERS // 2, LAYERS - 3)


def test_the_harness_sees_a_forward_that_returns_no_aux_states(reader):
    # No decoder on the fork drops capture any more (MiMo, the last one, records through edits/mimo.py.fork.toml), so
    # the check that could fail is shown on a capturing decoder with no aux layers set: a plain tensor comes back.
    outer, decoder = _build(reader, "vllm.model_executor.models.mimo", "MiMoForCausalLM")
    assert decoder.aux_hidden_state_layers == ()
    with torch.no_grad():
        out = outer.forward(input_ids=None, positions=torch.arange(TOKENS), inputs_embeds=torch.zeros(TOKENS, HIDDEN))
    assert isinstance(out, torch.Tensor)
