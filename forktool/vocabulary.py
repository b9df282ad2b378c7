"""The fork's shared vocabulary (exit codes, statuses), loaded from the overlay file without importing vLLM."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# Not via forktool.project (it imports the ops, which import this module); the same checkout root.
VOCABULARY_FILE = Path(__file__).resolve().parent.parent / "vllm" / "_fork" / "vocabulary.py"
_NAME = "forktool._overlay_vocabulary"


def _load():
    """Execute vllm/_fork/vocabulary.py as a standalone module: it is pure Python by design."""
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, VOCABULARY_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module  # enums and dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


_vocabulary = _load()
Exit = _vocabulary.Exit
EditStatus = _vocabulary.EditStatus
InternalStatus = _vocabulary.InternalStatus
AuditStatus = _vocabulary.AuditStatus
OracleStatus = _vocabulary.OracleStatus
OracleAnswer = _vocabulary.OracleAnswer
ContractRow = _vocabulary.ContractRow
Evidence = _vocabulary.Evidence
made_on_another_release = _vocabulary.made_on_another_release

__all__ = ["AuditStatus", "ContractRow", "EditStatus", "Evidence", "Exit", "InternalStatus", "OracleAnswer",
           "OracleStatus", "VOCABULARY_FILE", "made_on_another_release"]
