"""The audit's static reasoning on a small made-up tree, one case per way a model wires its decoder."""

from __future__ import annotations

import textwrap

import pytest

from forktool.audit.classify import classify
from forktool.sourcetree import SourceTree

FILES = {
    "vllm/model_executor/models/interfaces.py": """
        class EagleModelMixin: ...
        class SupportsEagle3:
            def set_aux_hidden_state_layers(self, layers): ...
        class SupportsMultiModal:
            def get_language_model(self): ...
    """,
    "vllm/model_executor/models/registry.py": """
        _TEXT_GENERATION_MODELS = {
            "GoodForCausalLM": ("good", "GoodForCausalLM"),
            "PlainForCausalLM": ("good", "PlainForCausalLM"),
            "LieForCausalLM": ("lie", "LieForCausalLM"),
            "NoCaptureForCausalLM": ("lie", "NoCaptureForCausalLM"),
            "SplitForCausalLM": ("vllm.models.split", "SplitForCausalLM"),
            "PostForCausalLM": ("good", "PostForCausalLM"),
            "CustomForCausalLM": ("custom", "CustomForCausalLM"),
            "DropForCausalLM": ("drop", "DropForCausalLM"),
            "DeferForCausalLM": ("drop", "DeferForCausalLM"),
            "RelayASR": ("relay", "RelayASR"),
            "BentASR": ("relay", "BentASR"),
            "SsmForCausalLM": ("ssm", "SsmForCausalLM"),
            "HybridSsmForCausalLM": ("hybrid_ssm", "HybridSsmForCausalLM"),
            "Ssm2ForCausalLM": ("ssm2", "Ssm2ForCausalLM"),
        }
        _MULTIMODAL_MODELS = {
            "WrapVL": ("wrap", "WrapVL"),
            "AnyVL": ("wrap", "AnyVL"),
        }
        _EMBEDDING_MODELS = {"GoodEmbed": ("good", "GoodForCausalLM")}
    """,
    "vllm/model_executor/models/good.py": """
        from .interfaces import EagleModelMixin, SupportsEagle3
        class GoodModel(nn.Module, EagleModelMixin): ...
        class GoodForCausalLM(nn.Module, SupportsEagle3):
            def __init__(self):
                self.model = GoodModel()
            def forward(self, x):
                hidden = self.model(x)
                return hidden
        class PlainForCausalLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = GoodModel()
            def forward(self, x):
                return self.model(x)
        class PostForCausalLM(PlainForCausalLM):
            def forward(self, x):
                hidden = self.model(x)
                return self.norm(hidden)
    """,
    "vllm/model_executor/models/relay.py": """
        from .good import GoodModel
        from .interfaces import SupportsMultiModal
        class Relay(nn.Module):
            def __init__(self):
                self.encoder = Encoder()
                self.decoder = GoodModel()
            def forward(self, x):
                out = self.decoder(x)
                return out
        class Bent(Relay):
            def forward(self, x):
                return self.decoder(x)[0]
        class RelayASR(nn.Module, SupportsMultiModal):
            def __init__(self):
                self.model = Relay()
            def get_language_model(self):
                return self.model.decoder
            def forward(self, x):
                return self.model(x)
        class BentASR(RelayASR):
            def __init__(self):
                self.model = Bent()
    """,
    "vllm/_fork/eagle3.py": """
        NOT_IMPLEMENTED: dict[str, tuple[str, str]] = {"LieForCausalLM": ("no capture", "mtp")}
    """,
    "vllm/model_executor/models/lie.py": """
        from vllm.model_executor.models import interfaces
        class Decoder(nn.Module): ...
        class LieForCausalLM(nn.Module, interfaces.SupportsEagle3):
            def __init__(self):
                self.model = Decoder()
        class NoCaptureForCausalLM(nn.Module):
            def __init__(self):
                self.model = Decoder()
    """,
    "vllm/models/split/__init__.py": """
        from vllm.platforms import current_platform
        if current_platform.is_rocm():
            from .amd import SplitForCausalLM
        else:
            from .nvidia import SplitForCausalLM
    """,
    "vllm/models/split/amd.py": """
        from vllm.model_executor.models.good import GoodModel
        class SplitForCausalLM(nn.Module):
            def __init__(self):
                self.model = GoodModel()
    """,
    "vllm/models/split/nvidia.py": """
        from vllm.model_executor.models.good import GoodModel
        from vllm.model_executor.models.interfaces import SupportsEagle3
        class SplitForCausalLM(nn.Module, SupportsEagle3):
            def __init__(self):
                self.model = self._build()
            def _build(self):
                return GoodModel()
    """,
    "vllm/model_executor/models/custom.py": """
        from .interfaces import SupportsEagle3
        class CustomForCausalLM(nn.Module, SupportsEagle3):
            def set_aux_hidden_state_layers(self, layers): ...
    """,
    "vllm/model_executor/models/drop.py": """
        from .interfaces import EagleModelMixin, SupportsEagle3
        class Base(nn.Module, EagleModelMixin):
            def forward(self, x):
                if self.aux_hidden_state_layers:
                    return x, [x]
                return x
        class Dropping(Base):
            def forward(self, x):
                return self.layers(x)
        class Deferring(Base):
            def forward(self, x):
                return super().forward(x)
        class DropForCausalLM(nn.Module, SupportsEagle3):
            def __init__(self):
                self.model = Dropping()
        class DeferForCausalLM(nn.Module, SupportsEagle3):
            def __init__(self):
                self.model = Deferring()
    """,
    "vllm/model_executor/models/ssm.py": """
        from vllm.model_executor.layers.mamba.mamba_mixer import MambaMixer
        class SsmModel(nn.Module):
            def __init__(self):
                self.mixer = MambaMixer()
        class SsmForCausalLM(nn.Module):
            def __init__(self):
                self.backbone = SsmModel()
    """,
    "vllm/model_executor/models/hybrid_ssm.py": """
        from .interfaces import SupportsEagle3
        from .ssm import SsmModel
        class HybridSsmForCausalLM(nn.Module, SupportsEagle3):
            def __init__(self):
                self.model = SsmModel()
    """,
    "vllm/model_executor/models/ssm2.py": """
        from vllm.model_executor.layers.mamba.mamba_mixer2 import MambaMixer2
        class Ssm2Model(nn.Module):
            def __init__(self):
                self.mixer = MambaMixer2()
        class Ssm2ForCausalLM(nn.Module):
            def __init__(self):
                self.model = Ssm2Model()
    """,
    "vllm/model_executor/models/wrap.py": """
        from .interfaces import SupportsEagle3, SupportsMultiModal
        from .utils import init_vllm_registered_model
        class WrapVL(nn.Module, SupportsMultiModal):
            def __init__(self, config):
                with self._mark_language_model(config):
                    self.language_model = init_vllm_registered_model(architectures=["PlainForCausalLM"])
        class AnyVL(nn.Module, SupportsMultiModal, SupportsEagle3):
            def __init__(self, config):
                lm = init_vllm_registered_model(hf_config=config.text_config)
                self.language_model = lm
    """,
}


@pytest.fixture(scope="module")
def rows():
    files = {path: textwrap.dedent(text) for path, text in FILES.items()}
    return {(r.arch, r.cls.rsplit(".", 2)[-2]): r for r in classify(SourceTree(files.__getitem__, set(files)))}


@pytest.mark.parametrize("arch, module, status, holder", [
    ("GoodForCausalLM", "good", "works", "model -> GoodModel"),
    ("PlainForCausalLM", "good", "broken-undeclared", "model -> GoodModel"),
    ("LieForCausalLM", "lie", "refused by fork", "model -> Decoder"),
    ("NoCaptureForCausalLM", "lie", "not applicable", "model -> Decoder"),
    ("SplitForCausalLM", "amd", "broken-undeclared", "model -> GoodModel"),
    ("SplitForCausalLM", "nvidia", "works", "model -> GoodModel"),
    ("CustomForCausalLM", "custom", "works", "custom setter in vllm.model_executor.models.custom.CustomForCausalLM"),
    ("WrapVL", "wrap", "broken-undeclared", "language_model.model -> GoodModel"),
    ("AnyVL", "wrap", "unresolvable statically", "language_model"),
    ("GoodEmbed", "good", "not applicable", ""),
    ("DropForCausalLM", "drop", "broken-declared-not-implemented", "model -> Dropping"),
    ("DeferForCausalLM", "drop", "works", "model -> Deferring"),
    # Mamba-1 layers cannot roll rejected drafts back: in the outer class's module or in its decoder's.
    ("SsmForCausalLM", "ssm", "unsupported", "self -> SsmForCausalLM"),
    ("HybridSsmForCausalLM", "hybrid_ssm", "unsupported", "model -> SsmModel"),
    ("Ssm2ForCausalLM", "ssm2", "not applicable", "model -> Ssm2Model"),  # Mamba-2 handles drafts
])
def test_classification(rows, arch, module, status, holder):
    row = rows[(arch, module)]
    assert (row.status, row.holder) == (status, holder), row


def test_reasons_and_forward_pass_through(rows):
    assert rows[("AnyVL", "wrap")].reason == "language model chosen from the checkpoint config at run time"
    assert rows[("GoodEmbed", "good")].reason.startswith("pooling model")
    assert rows[("NoCaptureForCausalLM", "lie")].reason.startswith("inner model captures no aux hidden states")
    assert rows[("GoodForCausalLM", "good")].passes_through is True
    assert rows[("PlainForCausalLM", "good")].passes_through is True
    assert rows[("PostForCausalLM", "good")].passes_through is False
    # forward calls a middle module whose own forward returns the decoder's output untouched (FunASR).
    assert rows[("RelayASR", "relay")].holder == "model.decoder -> GoodModel"
    assert rows[("RelayASR", "relay")].passes_through is True
    assert rows[("BentASR", "relay")].passes_through is False


def test_unsupported_rows_say_why_no_speculative_method_works(rows):
    for key in (("SsmForCausalLM", "ssm"), ("HybridSsmForCausalLM", "hybrid_ssm")):
        assert rows[key].reason.startswith("Mamba-1 layers (MambaMixer) keep one state per request"), rows[key]


def test_an_empty_refusal_table_refuses_nothing():
    files = {path: textwrap.dedent(text) for path, text in FILES.items()}
    files["vllm/_fork/eagle3.py"] = "NOT_IMPLEMENTED: dict[str, tuple[str, str]] = {}\n"
    rows = {(r.arch, r.cls.rsplit(".", 2)[-2]): r for r in classify(SourceTree(files.__getitem__, set(files)))}
    assert rows[("LieForCausalLM", "lie")].status == "broken-declared-not-implemented"
    assert not [r for r in rows.values() if r.status == "refused by fork"]


def test_refusal_table_turns_declared_not_implemented_into_refused(rows):
    assert rows[("LieForCausalLM", "lie")].reason.startswith("config validation refuses aux-state methods")
    # Declared-not-implemented without a refusal entry stays broken.
    assert rows[("DropForCausalLM", "drop")].status == "broken-declared-not-implemented"
    assert rows[("DropForCausalLM", "drop")].reason == "Dropping inherits EagleModelMixin but its forward never captures"


@pytest.mark.parametrize("eagle3, message", [
    (None, "fork tree without vllm._fork.eagle3"),
    ("NOT_IMPLEMENTED = frozenset()\n", "no module-level dict literal NOT_IMPLEMENTED"),
    ("REFUSED = {'LieForCausalLM': 'x'}\n", "no module-level dict literal NOT_IMPLEMENTED"),
])
def test_a_fork_tree_without_its_refusal_table_is_an_error_not_an_empty_set(eagle3, message):
    from forktool.errors import ForkError

    files = {path: textwrap.dedent(text) for path, text in FILES.items()}
    files["vllm/_fork/__init__.py"] = ""
    files.pop("vllm/_fork/eagle3.py")
    if eagle3 is not None:
        files["vllm/_fork/eagle3.py"] = eagle3
    with pytest.raises(ForkError, match=message):
        classify(SourceTree(files.__getitem__, set(files)))


def test_an_upstream_tree_has_no_refusals():
    files = {path: textwrap.dedent(text) for path, text in FILES.items() if not path.startswith("vllm/_fork/")}
    rows = {(r.arch, r.cls.rsplit(".", 2)[-2]): r for r in classify(SourceTree(files.__getitem__, set(files)))}
    assert rows[("LieForCausalLM", "lie")].status == "broken-declared-not-implemented"
