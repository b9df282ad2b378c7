"""Does the checkpoint hold what the speculative model loads? Tensor names and dtypes only (checkpoint.py).

* MTP: every declared MTP layer needs tensors. vLLM maps a checkpoint name to its MTP layer with the MTP
  class's own `get_spec_layer_idx_from_weight_name` (vllm/model_executor/models/utils.py), after the name has
  lost the multimodal text tower's prefix (GLM-5.3-Flash's MTP loader turns `model.language_model.` into
  `model.`, models/glm5next/common/mtp.py; the target class's own `hf_to_vllm_mapper` says where its text tower
  lives), and DeepSeekMTP
  raises "MTP speculative decoding layer L weights missing from checkpoint" after loading when one has none
  (deepseek_mtp.py, vllm#35548); other classes stop with "Following weights were not initialized from
  checkpoint" (default_loader.py) or draft from uninitialized memory.
* An MTP layer stored in BF16 in a quantized checkpoint must be on the quantization config's ignore list:
  otherwise vLLM builds it quantized (the config's own get_quant_method decides) and the BF16 tensor does not
  fit its parameters (vllm#49187: amd/GLM-5.1-NVFP4, "size mismatch").
* A draft's tensors go through its class's own load_weights (draft_build.py).
"""

from __future__ import annotations

import importlib

from vllm._fork.spec_check import checkpoint
from vllm._fork.spec_check.findings import FAIL, INFO, PASS, UNKNOWN, WARN, Finding
from vllm._fork.spec_check.inspection import model_class
from vllm._fork.vocabulary import CheckName

MTP, QUANT, DRAFT = CheckName.MTP_TENSORS, CheckName.MTP_QUANTIZATION, CheckName.DRAFT_TENSORS
UNQUANTIZED = ("BF16", "F16", "F32")
SHOWN = 4  # names listed in a reason; the rest are counted
TEXT_TOWER = "language_model."


def _shown(names) -> str:
    names = sorted(names)
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _layer_of(draft_model_config):
    """The MTP class's own name -> MTP layer function (None when its module has none)."""
    from vllm.model_executor.models.registry import ModelRegistry

    arch = (draft_model_config.architectures or [None])[0]
    entry = ModelRegistry.models.get(arch)
    module_name = getattr(entry, "module_name", None)
    if not module_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    function = getattr(module, "get_spec_layer_idx_from_weight_name", None)
    if function is None:
        cls = getattr(module, getattr(entry, "class_name", ""), None)
        function = getattr(importlib.import_module(cls.__module__), "get_spec_layer_idx_from_weight_name",
                           None) if cls is not None else None
    return function


def text_tower_names(model_config, names) -> dict[str, str]:
    """Checkpoint name -> the name inside the text tower: the target class's own `hf_to_vllm_mapper` first (a
    multimodal class maps `model.language_model.` to `language_model.model.`), then the tower's module
    prefix dropped (vLLM builds a multimodal target's text model as its `language_model` submodule)."""
    mapper = getattr(model_class(model_config), "hf_to_vllm_mapper", None)
    out = {}
    for name in names:
        mapped = mapper.map_name(name) if mapper is not None else name
        if mapped is not None:  # None: the class drops this tensor
            out[name] = mapped.removeprefix(TEXT_TOWER)
    return out


def mtp_findings(vllm_config, folder: str) -> list[Finding]:
    """Tensors of each declared MTP layer, and their dtypes against the quantization config."""
    spec = vllm_config.speculative_config
    draft = spec.draft_model_config
    config = draft.hf_text_config
    declared = getattr(config, "num_nextn_predict_layers", None) or 0
    listing = checkpoint.tensors(folder)
    if listing is None:
        return [Finding(MTP, UNKNOWN, f"cannot tell whether the checkpoint has its {declared or ''} MTP "
                        f"layer{'s' * (declared != 1)}' tensors: no {checkpoint.INDEX} or *.safetensors next to "
                        "its config.json", checkpoint.where(folder))]
    layer_of = _layer_of(draft)
    if layer_of is None or not declared:
        return [Finding(MTP, INFO, f"{(draft.architectures or ['?'])[0]} names its MTP tensors its own way; "
                        f"not checked ({len(listing.names):,} tensors in {listing.source})")]
    base = config.num_hidden_layers
    per_layer: dict[int, list[str]] = {layer: [] for layer in range(base, base + declared)}
    for name, inner in text_tower_names(vllm_config.model_config, listing.names).items():
        layer = layer_of(config, inner)
        if layer in per_layer:
            per_layer[layer].append(name)
    missing = [layer for layer, names in per_layer.items() if not names]
    if missing:
        return [Finding(MTP, FAIL, f"the config declares {declared} MTP layer{'s' * (declared > 1)} "
                        f"(layer{'s' * (len(missing) > 1)} {', '.join(map(str, missing))}), but "
                        f"{listing.source} has no tensor for {'them' if len(missing) > 1 else 'it'} "
                        f"({len(listing.names):,} tensors): vLLM stops after loading every shard with 'MTP "
                        f"speculative decoding layer {missing[0]} weights missing from checkpoint' or 'Following "
                        "weights were not initialized from checkpoint' (vllm#35548)",
                        "use a checkpoint that ships its MTP layers (quantized repacks often drop them), or a "
                        "drafter method")]
    found = [Finding(MTP, PASS, f"MTP layer{'s' * (declared > 1)} {', '.join(map(str, per_layer))}: "
                     f"{sum(map(len, per_layer.values())):,} tensors in {listing.source}")]
    quant = quantization_finding(vllm_config, per_layer, listing)
    return found + ([quant] if quant else [])


def _quantized(quant_config, prefix: str) -> bool | None:
    """Would vLLM build the linear layer at `prefix` quantized? The config's own get_quant_method decides."""
    from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod

    layer = LinearBase.__new__(LinearBase)  # only its type is read before the ignore list decides
    try:
        method = quant_config.get_quant_method(layer, prefix)
    except Exception:  # a method that needs a built layer: the ignore list alone cannot answer
        return None
    return method is not None and not isinstance(method, UnquantizedLinearMethod)


def quantization_finding(vllm_config, per_layer: dict[int, list[str]], listing) -> Finding | None:
    """MTP linear weights stored unquantized must be on the quantization config's ignore list."""
    quant_config = getattr(vllm_config, "quant_config", None)
    if quant_config is None:
        return None
    if not listing.dtypes:
        return Finding(QUANT, INFO, f"dtypes of the MTP tensors not known ({listing.source} gives names only; the "
                       f"shard headers give dtypes): not checked against the {quant_config.get_name()} config")
    stored = {name[: -len(".weight")]: listing.dtypes[name] for names in per_layer.values() for name in names
              if name.endswith(".weight") and len(listing.shapes.get(name, [])) == 2
              and listing.dtypes.get(name) in UNQUANTIZED and not any(part in name.rsplit(".", 2)[-2]
                                                                      for part in ("embed", "head", "norm"))}
    if not stored:
        return None
    answers = {prefix: _quantized(quant_config, prefix) for prefix in stored}
    clash = [prefix for prefix, quantized in answers.items() if quantized]
    if clash:
        return Finding(QUANT, FAIL, f"{len(clash)} MTP linear weights are stored in {stored[clash[0]]} but the "
                       f"{quant_config.get_name()} config does not exclude them ({_shown(clash)}): vLLM builds "
                       "them quantized and the unquantized tensors do not fit (vllm#49187: size mismatch)",
                       "add the MTP layers to the quantization config's ignore/exclude list, or use a "
                       "checkpoint with quantized MTP layers")
    if any(quantized is None for quantized in answers.values()):
        return Finding(QUANT, UNKNOWN, f"the {quant_config.get_name()} config cannot say from its ignore list "
                       "alone whether the unquantized MTP weights stay unquantized", "check on the GPU host")
    return Finding(QUANT, PASS, f"{len(stored)} unquantized MTP linear weights are excluded by the "
                   f"{quant_config.get_name()} config")


def no_listing(folder: str, arch: str) -> Finding:
    return Finding(DRAFT, UNKNOWN, f"cannot tell whether the draft's tensors fit {arch}: no {checkpoint.INDEX} or "
                   "*.safetensors next to its config.json", checkpoint.where(folder))


def draft_findings(build, folder: str, arch: str) -> list[Finding]:
    """The draft checkpoint's tensors against what its class loaded (draft_build.DraftBuild)."""
    if build.listing is None:
        return [no_listing(folder, arch)]
    if build.tracked_error is not None:
        return [Finding(DRAFT, FAIL, f"{arch}: {str(build.tracked_error).splitlines()[0][:300]} (vLLM's loader "
                        "raises this after reading the draft)", "use the draft checkpoint its model card names")]
    if build.misfits:
        name, message = build.misfits[0]
        more = f" (and {len(build.misfits) - 1} more)" if len(build.misfits) > 1 else ""
        return [Finding(DRAFT, FAIL, f"{name} in {build.listing.source} does not fit the parameter {arch} builds for "
                        f"it at TP={build.tp}{more}: its weight loader says '{message}'; vLLM stops while loading "
                        "the draft", "use the draft checkpoint made for this target (its aux layer ids, hidden "
                        "size and vocabulary), or the draft class its model card names")]
    model = build.model
    unloaded = {name: param for name, param in model.named_parameters() if id(param) not in build.loaded}
    # vLLM checks this class's loading only when its load_weights returns the loaded names; where it does not,
    # a vector left unloaded may be one the class fills itself (DFlash's mask_embedding): only matrices warn.
    matrices = [name for name, param in unloaded.items() if param.dim() >= 2]
    if matrices:
        return [Finding(DRAFT, WARN, f"{len(matrices)} of {arch}'s weight matrices get no tensor from "
                        f"{build.listing.source} and are not shared with the target ({_shown(matrices)}): it "
                        "starts, but drafts with uninitialized weights (acceptance near zero)",
                        "use the draft checkpoint its model card names")]
    if unloaded:
        return [Finding(DRAFT, INFO, f"all {len(build.listing.names):,} tensors load into {arch}; no tensor "
                        f"reaches {_shown(unloaded)} (a vector the class may fill itself)"
                        + (f"; {' and '.join(build.shared)} from the target" if build.shared else ""))]
    return [Finding(DRAFT, PASS, f"all {len(build.listing.names):,} tensors of {build.listing.source} load into "
                    f"{arch}" + (f"; {' and '.join(build.shared)} from the target" if build.shared else ""))]
