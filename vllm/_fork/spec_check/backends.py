"""The attention backend vLLM picks for a layer on the named NVIDIA GPU, without that GPU.

vLLM's CUDA platform walks its own priority list (`vllm/platforms/cuda.py` `_get_backend_priorities`) and takes
the first backend whose `validate_configuration` (`vllm/v1/attention/backend.py`) has no reasons against the
layer; with none left it raises "No valid attention backend found". Both are run here for the stand-in of
`--gpu`, answering what the GPU host would: the platform is CUDA, the kernels this wheel ships (FlashAttention,
FlashMLA) load, and no network is probed (FlashInfer's TRTLLM kernels count as there only when their cubins are installed).
A backend whose module cannot even be imported on this host is reported as not evaluated, never as unfit.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# What a backend module may raise when imported or asked on a host without the GPU (no driver, no kernels).
HOST_ERRORS = (ImportError, OSError, RuntimeError, AttributeError, AssertionError, NotImplementedError)
# Where the wheel keeps its compiled extensions; a CUDA host loads them, this one lacks the driver for them.
EXTENSION_PACKAGES = ("vllm", "vllm.vllm_flash_attn")
# Modules that record at import whether an extension loaded, and decide backends by it: re-read with the
# extensions loaded (once per process) if they were imported before.
AVAILABILITY_MODULES = ("vllm.vllm_flash_attn.flash_attn_interface", "vllm.v1.attention.ops.flashmla",
                        "vllm.v1.attention.backends.fa_utils")
_REREAD: set[str] = set()


class NoBackend(ValueError):
    """No attention backend fits the layer on this GPU (vLLM raises ValueError there too)."""


@dataclass
class Selection:
    """One selection: the layer's selector config, the backend picked, and what was passed over."""

    config: object
    num_heads: int | None
    chosen: str | None
    not_evaluated: list[str] = field(default_factory=list)  # higher-priority backends this host cannot import
    reasons: dict[str, list[str]] = field(default_factory=dict)

    def describe(self) -> str:
        skipped = (f" ({', '.join(self.not_evaluated)} ahead of it cannot be evaluated on this host)"
                   if self.not_evaluated else "")
        return f"{self.chosen}{skipped}"


SELECTIONS: list[Selection] = []  # every selection of this process, in order (the draft build reads its own)
_TOLERANT: list | None = None  # while a meta build runs: (backend class, its own get_impl_cls) to restore


def _tolerant(impl_cls):
    """The backend's impl, whose constructor may ask the device (SM count, kernels) as a layer is built: where
    this host cannot answer, the layer keeps the shapes it gave and nothing else (it never runs here)."""

    class MetaBuildImpl(impl_cls):
        def __init__(self, num_heads, head_size, scale, num_kv_heads=None, *args, **kwargs):
            try:
                super().__init__(num_heads, head_size, scale, num_kv_heads, *args, **kwargs)
            except HOST_ERRORS:
                self.num_heads, self.head_size, self.scale = num_heads, head_size, scale
                self.num_kv_heads = num_kv_heads or num_heads
                self.dcp_world_size, self.dcp_rank = 1, 0

    MetaBuildImpl.__name__ = MetaBuildImpl.__qualname__ = impl_cls.__name__
    return MetaBuildImpl


@contextmanager
def tolerant_impls():
    """While the draft is built on meta, the backends picked give impls that tolerate this host (above)."""
    global _TOLERANT
    _TOLERANT = []
    try:
        yield
    finally:
        for klass, original in reversed(_TOLERANT):
            klass.get_impl_cls = original
        _TOLERANT = None


def _make_tolerant(klass) -> None:
    if _TOLERANT is None or "get_impl_cls" not in vars(klass) or any(k is klass for k, _ in _TOLERANT):
        return
    original = vars(klass)["get_impl_cls"]
    impl = _tolerant(klass.get_impl_cls())
    _TOLERANT.append((klass, original))
    klass.get_impl_cls = staticmethod(lambda: impl)


def _shipped_extensions() -> list[str]:
    """Module names of the compiled extensions this wheel ships (e.g. vllm._flashmla_C)."""
    import vllm

    root = Path(vllm.__file__).parent
    found = []
    for package in EXTENSION_PACKAGES:
        folder = root.joinpath(*package.split(".")[1:])
        found += [f"{package}.{path.name.split('.')[0]}" for path in folder.glob("*.so")]
    return found


@contextmanager
def _shipped_extensions_loaded(reread: bool = True):
    """Empty stand-ins for the wheel's extensions that this host cannot load (nothing in them is called), and
    the modules that recorded their absence re-read; the stand-ins leave sys.modules afterwards."""
    added = [name for name in _shipped_extensions() if name not in sys.modules]
    for name in added:
        sys.modules[name] = types.ModuleType(name)
    try:
        for name in AVAILABILITY_MODULES if reread else ():
            if name in sys.modules and name not in _REREAD:
                _REREAD.add(name)
                if name.rpartition(".")[0] in sys.modules:
                    importlib.reload(sys.modules[name])
                else:  # its package failed to import here (a model's config hook asked first): import it afresh
                    del sys.modules[name]
                    importlib.import_module(name)
        yield
    finally:
        for name in added:
            if isinstance(sys.modules.get(name), types.ModuleType) and not getattr(sys.modules[name], "__file__",
                                                                                       None):
                sys.modules.pop(name, None)


def cuda_module():
    """vLLM's CUDA platform module (it imports a compiled extension first: stand-ins while importing)."""
    with _shipped_extensions_loaded(reread=False):
        import vllm.platforms.cuda as cuda
    return cuda


@contextmanager
def as_on_the_gpu_host(platform_cls):
    """While selecting: the stand-in is CUDA, and FlashInfer's artifactory is not probed over the network."""
    from vllm.platforms.interface import PlatformEnum

    with ExitStack() as stack:
        before = platform_cls._enum
        platform_cls._enum = PlatformEnum.CUDA
        stack.callback(setattr, platform_cls, "_enum", before)
        stack.enter_context(_shipped_extensions_loaded())
        try:
            flashinfer = importlib.import_module("vllm.utils.flashinfer")
        except ImportError:
            flashinfer = None
        if flashinfer is not None and hasattr(flashinfer, "has_nvidia_artifactory"):
            probe = flashinfer.has_nvidia_artifactory
            flashinfer.has_nvidia_artifactory = getattr(flashinfer, "has_flashinfer_cubin", lambda: False)
            stack.callback(setattr, flashinfer, "has_nvidia_artifactory", probe)
        yield


def _priorities(cuda, config, capability, num_heads):
    """vLLM's priority list for this layer, called with the arguments this vLLM's version takes."""
    order = cuda._get_backend_priorities
    offered = {"use_mla": config.use_mla, "device_capability": capability, "num_heads": num_heads,
               "kv_cache_dtype": config.kv_cache_dtype, "use_non_causal": getattr(config, "use_non_causal", False),
               "head_size": config.head_size, "use_mm_prefix": getattr(config, "use_mm_prefix", False)}
    accepted = inspect.signature(order).parameters
    return order(**{k: v for k, v in offered.items() if k in accepted})


def _reasons(backend, config, capability) -> list[str] | None:
    """vLLM's reasons against `backend` for this layer; None when this host cannot evaluate it."""
    try:
        return list(backend.get_class().validate_configuration(device_capability=capability, **config._asdict()))
    except HOST_ERRORS:
        return None


def select(platform_cls, selected_backend, config, num_heads: int | None = None) -> str:
    """The class path of the backend vLLM picks on the stand-in's GPU; NoBackend as vLLM's ValueError."""
    capability = platform_cls.get_device_capability()
    with as_on_the_gpu_host(platform_cls):
        cuda = cuda_module()
        candidates = [selected_backend] if selected_backend is not None else _priorities(
            cuda, config, capability, num_heads)
        selection = Selection(config, num_heads, None)
        for backend in candidates:
            reasons = _reasons(backend, config, capability)
            if reasons is None:
                selection.not_evaluated.append(backend.name)
            elif reasons:
                selection.reasons[backend.name] = reasons
            else:
                selection.chosen = backend.name
                break
    SELECTIONS.append(selection)
    if selection.chosen is None:
        unknown = f"; not evaluated on this host: {', '.join(selection.not_evaluated)}" * bool(
            selection.not_evaluated)
        raise NoBackend(f"No valid attention backend found for {platform_cls.get_device_name()} with {config!r}. "
                        f"Reasons: {selection.reasons}{unknown}")
    chosen = next(b for b in candidates if b.name == selection.chosen).get_class()
    _make_tolerant(chosen)
    module, qualname = chosen.full_cls_name()
    return f"{module}.{qualname}"


def prefill(platform_cls, select_prefill, config):
    """The MLA prefill backend vLLM's Platform default picks for this GPU; NoBackend where none fits."""
    with as_on_the_gpu_host(platform_cls):
        try:
            return select_prefill(platform_cls, config)
        except ValueError as exc:
            raise NoBackend(str(exc)) from None
