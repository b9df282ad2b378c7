"""The draft model built as the speculator's own loader builds it, on the meta device, with no GPU and no weights.

The V2 runner's speculators load their draft through `load_eagle_model` (EAGLE/EAGLE3), `load_dflash_model`
(DFlash/DFlash2) or `load_dspark_model` (DSpark) in `vllm/v1/worker/gpu/spec_decode/`: each prepares the draft's
VllmConfig (non-causal attention, its own TP for DSpark, the draft KV dtype), calls `get_model`, then shares the
target's embedding and lm_head where the draft has none. Here `get_model` is answered by building the class on
the meta device as rank 0 of its TP group (vLLM's `initialize_model`) and feeding its `load_weights` the
checkpoint's tensor names, each parameter's weight loader recording that it was given a tensor and, where the
listing gives the tensor's shape, running on a meta tensor of that shape so the loader's own size assertion
decides whether it fits (TP-sharded as rank 0 shards it). What the class reads from its config, the backend
each attention layer gets, which parameters no tensor reaches and which tensors do not fit are then vLLM's own
answers. The target is a stand-in with an embedding and an lm_head and nothing else.
"""

from __future__ import annotations

import importlib
import types
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from vllm._fork.spec_check.checkpoint import Listing

# Speculator (checks.speculator_name) -> the loader function its load_draft_model calls.
LOADERS = {
    "EagleSpeculator": ("vllm.v1.worker.gpu.spec_decode.eagle.utils", "load_eagle_model"),
    "DFlashSpeculator": ("vllm.v1.worker.gpu.spec_decode.dflash.utils", "load_dflash_model"),
    "DFlash2Speculator": ("vllm.v1.worker.gpu.spec_decode.dflash.utils", "load_dflash_model"),
    "DSparkSpeculator": ("vllm.v1.worker.gpu.spec_decode.dspark.utils", "load_dspark_model"),
}
# torch factories that take a device: models allocate buffers on current_platform's device ("cuda"), not meta.
SIZED = "_spec_check_name"  # set on a meta tensor whose shape is the checkpoint's: its name
FACTORIES = ("empty", "zeros", "ones", "full", "arange", "tensor", "rand", "randn", "randint", "empty_strided",
             "linspace", "eye", "as_tensor")
VALUED = ("tensor", "as_tensor", "arange", "linspace")  # small, and a constructor may read them back


def on_meta(data_on_cpu: bool = False):
    """A torch function mode under which every tensor a constructor makes lands on the meta device, whatever
    device it names; `data_on_cpu`: tensors made from values (torch.tensor, arange, ...) stay on the CPU, for a
    constructor that reads numbers back from them (BLOOM's ALiBi slopes go through .tolist())."""
    import torch
    import torch.overrides

    valued = {getattr(torch, name) for name in VALUED} if data_on_cpu else set()
    factories = {getattr(torch, name) for name in FACTORIES} - valued

    class OnMeta(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories or func in valued:
                kwargs["device"] = "meta" if func in factories else "cpu"
                kwargs.pop("pin_memory", None)
            elif func is torch.Tensor.to:
                args = tuple("meta" if isinstance(a, (str, torch.device)) and str(a) != "meta" else a
                             for a in args)
                if "device" in kwargs:
                    kwargs["device"] = "meta"
            elif func is torch.Tensor.cuda:
                return args[0]
            return func(*args, **kwargs)

    return OnMeta()


@contextmanager
def layers_forgotten(compilation_config, on_success: bool = True):
    """The layers a build registers (by name, for the forward context) are taken out again afterwards, or only when
    it raises (`on_success=False`): a name registered twice is refused."""
    context = getattr(compilation_config, "static_forward_context", {})
    moe = getattr(compilation_config, "static_all_moe_layers", [])
    names, moe_count = set(context), len(moe)
    succeeded = False
    try:
        yield
        succeeded = True
    finally:
        if on_success or not succeeded:
            for name in set(context) - names:
                del context[name]
            del moe[moe_count:]


def _unknown_equal():
    """torch.equal on meta tensors has no answer: a draft that ships its own embedding or lm_head keeps it (the
    loader compares it with the target's to decide whether to share)."""
    import torch
    import torch.overrides

    class MetaEqual(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            if func is torch.equal and any(getattr(a, "is_meta", False) for a in args):
                return False
            return func(*args, **(kwargs or {}))

    return MetaEqual()


@contextmanager
def one_rank(tp: int):
    """Rank 0 of a TP group of `tp` and of every other (size-1) group, without a process group: constructors
    only ask sizes and ranks."""
    from vllm.distributed import parallel_state

    def group(size: int):
        return types.SimpleNamespace(world_size=size, rank_in_group=0, rank=0, local_rank=0, ranks=list(range(size)),
                                     is_first_rank=True, is_last_rank=size == 1, device_group=None, cpu_group=None)

    names = [n for n, v in vars(parallel_state).items() if n.isupper() and n.startswith("_") and v is None
             and n.strip("_").isalpha() and len(n) <= 6]
    for name in names:
        setattr(parallel_state, name, group(tp if name in ("_TP", "_EP") else 1))
    try:
        yield
    finally:
        for name in names:
            setattr(parallel_state, name, None)


@dataclass
class DraftBuild:
    """The draft as the speculator holds it after loading, or why it could not be built."""

    model: object | None = None  # the torch module
    error: BaseException | None = None
    selections: list = field(default_factory=list)  # backends.Selection of its attention layers
    loaded: set[int] = field(default_factory=set)  # id() of the parameters a checkpoint tensor reached
    returned: set[str] | None = None  # what load_weights returned (vLLM checks it when it is a set)
    tracked_error: BaseException | None = None  # the loader's own "not initialized from checkpoint" error
    listing: Listing | None = None
    loading: bool = False  # an error while load_weights ran is the checkpoint's, not the class's
    shared: list[str] = field(default_factory=list)  # draft modules the loader replaced with the target's
    tp: int = 1  # the TP size the loader built the draft for
    misfits: list[tuple[str, str]] = field(default_factory=list)  # (checkpoint name, the loader's size message)


def _record_loads(model, build: DraftBuild) -> None:
    from vllm.model_executor.model_loader.weight_utils import default_weight_loader

    for param in model.parameters():
        original = getattr(param, "weight_loader", None) or default_weight_loader

        def loader(*args, _param=param, _original=original, **kwargs):
            build.loaded.add(id(_param))
            # Only a tensor as the listing gave it (a class that reshapes it first hands over another tensor).
            name = getattr(args[1] if len(args) > 1 else None, SIZED, None)
            if name is not None:
                try:
                    _original(*args, **kwargs)
                except AssertionError as exc:  # vLLM's loaders assert that a tensor fits its parameter
                    build.misfits.append((name, str(exc).splitlines()[0][:200]))
            return True  # expert loaders are asked whether this rank took the tensor

        param.weight_loader = loader


def _feed(build: DraftBuild, model, model_config) -> None:
    """The checkpoint's tensor names through the class's own load_weights, then the loader's own check."""
    import torch

    listing = build.listing
    if listing is None:
        return
    _record_loads(model, build)
    dtype = model_config.dtype

    def tensors():
        for name in sorted(listing.names):
            tensor = torch.empty(listing.shapes.get(name) or [1], dtype=dtype, device="meta")
            if name in listing.shapes:
                setattr(tensor, SIZED, name)
            yield name, tensor

    build.loading = True
    build.returned = model.load_weights(tensors())
    build.loading = False
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader

    track = getattr(DefaultModelLoader, "track_weights_loading", None)
    if isinstance(build.returned, set) and model_config.quantization is None and track is not None:
        try:
            track(None, model, build.returned, quantized=False)
        except ValueError as exc:
            build.tracked_error = exc


def _fake_target(vocab: int, hidden: int):
    """What the loaders read from the target: model.embed_tokens and lm_head (no parameters of their own)."""
    import torch

    target = torch.nn.Module()
    target.model = torch.nn.Module()
    target.model.embed_tokens = torch.nn.Module()
    target.lm_head = torch.nn.Module()
    for module in (target.model.embed_tokens, target.lm_head):
        module.weight = torch.empty(vocab, hidden, device="meta")
    return target


def build(vllm_config, speculator: str, listing: Listing | None) -> DraftBuild | None:
    """The loaded draft of `speculator`, or None for a speculator whose draft this does not build."""
    import torch

    from vllm._fork.spec_check import backends
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    if speculator not in LOADERS:
        return None
    module_name, function = LOADERS[speculator]
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # an older base without this loader
        return None
    result = DraftBuild(listing=listing)
    first = len(backends.SELECTIONS)

    def get_model(*, vllm_config, model_config=None, prefix="", load_config=None):
        model_config = model_config or vllm_config.model_config
        tp = result.tp = vllm_config.parallel_config.tensor_parallel_size
        with ExitStack() as stack:
            stack.enter_context(set_current_vllm_config(vllm_config))
            stack.enter_context(one_rank(tp))
            stack.enter_context(torch.device("meta"))
            stack.enter_context(on_meta())
            stack.enter_context(set_default_torch_dtype(model_config.dtype))
            model = initialize_model(vllm_config=vllm_config, model_config=model_config, prefix=prefix)
            result.model = model
            _feed(result, model, model_config)
        return model

    target_text = vllm_config.model_config.hf_text_config
    target = _fake_target(vllm_config.model_config.get_vocab_size(), target_text.hidden_size)
    # The loaders import get_model at module level or inside the function (dspark): answer both.
    holders = [m for m in (module, importlib.import_module("vllm.model_executor.model_loader"))
               if hasattr(m, "get_model")]
    real = [(m, m.get_model) for m in holders]
    for holder in holders:
        holder.get_model = get_model
    result.tp = vllm_config.parallel_config.tensor_parallel_size
    try:
        with one_rank(result.tp), backends.tolerant_impls(), layers_forgotten(vllm_config.compilation_config), \
                _unknown_equal():
            result.model = getattr(module, function)(target, vllm_config)
        ours = {id(target.model.embed_tokens): "embed_tokens", id(target.lm_head): "lm_head"}
        result.shared = sorted({ours[id(m)] for _, m in result.model.named_modules(remove_duplicate=False)
                                if id(m) in ours})
    except Exception as exc:  # classified by the findings: a config the class refuses, or this host's limits
        result.error = exc
    finally:
        for holder, original in real:
            holder.get_model = original
        result.selections = backends.SELECTIONS[first:]
    return result
