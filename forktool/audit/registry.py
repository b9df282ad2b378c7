"""vLLM's model registry read statically: architecture -> (module, class, registry table)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

REGISTRY_PATH = "vllm/model_executor/models/registry.py"
MODELS_PACKAGE = "vllm.model_executor.models"

# Tables whose architectures generate text, and why the others are out of scope for speculation.
GENERATION_TABLES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")
NOT_APPLICABLE = {
    "_EMBEDDING_MODELS": "pooling model: no decoding to speculate on",
    "_LATE_INTERACTION_MODELS": "pooling model: no decoding to speculate on",
    "_REWARD_MODELS": "reward model: no decoding to speculate on",
    "_TOKEN_CLASSIFICATION_MODELS": "classification model: no decoding to speculate on",
    "_SEQUENCE_CLASSIFICATION_MODELS": "classification model: no decoding to speculate on",
    "_SPECULATIVE_DECODING_MODELS": "a draft model itself, not a target",
}
TRANSFORMERS_TABLES = ("_TRANSFORMERS_SUPPORTED_MODELS", "_TRANSFORMERS_BACKEND_MODELS")


@dataclass(frozen=True)
class Entry:
    """One registered architecture."""

    arch: str
    module: str  # absolute module name
    cls: str
    table: str


def _module(name: str) -> str:
    return name if "." in name else f"{MODELS_PACKAGE}.{name}"


def read_registry(source: str) -> list[Entry]:
    """Every `"Arch": ("module", "Class")` entry of the registry's module-level dict literals."""
    entries = []
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if not (isinstance(target, ast.Name) and isinstance(node.value, ast.Dict)):
            continue
        for key, value in zip(node.value.keys, node.value.values):
            if (isinstance(key, ast.Constant) and isinstance(value, ast.Tuple) and len(value.elts) == 2
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)):
                module, cls = (e.value for e in value.elts)
                entries.append(Entry(key.value, _module(module), cls, target.id))
    return entries
