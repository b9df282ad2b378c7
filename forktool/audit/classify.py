"""Classify every registered architecture: works, fixed by fork, broken, not applicable, unresolvable."""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass

from forktool.audit.contract import ContractReader
from forktool.audit.registry import (
    GENERATION_TABLES,
    NOT_APPLICABLE,
    REGISTRY_PATH,
    TRANSFORMERS_TABLES,
    read_registry,
)
from forktool.audit.uncaptured import NOT_CAPTURED, STUB_REASON, is_stub
from forktool.audit.unsupported import unsupported_reason
from forktool.errors import ForkError
from forktool.sourcetree import SourceTree
from forktool.vocabulary import AuditStatus

WORKS, FIXED = AuditStatus.WORKS, AuditStatus.FIXED
UNDECLARED, NOT_IMPLEMENTED = AuditStatus.UNDECLARED, AuditStatus.NOT_IMPLEMENTED
NOT_APPLICABLE_STATUS, UNRESOLVABLE = AuditStatus.NOT_APPLICABLE, AuditStatus.UNRESOLVABLE
REFUSED, UNSUPPORTED = AuditStatus.REFUSED, AuditStatus.UNSUPPORTED
ORACLE_FAILED = AuditStatus.ORACLE_FAILED
# The fork's table of declared-but-not-implemented targets that config validation refuses early.
REFUSAL_MODULE, REFUSAL_TABLE = "vllm._fork.eagle3", "NOT_IMPLEMENTED"
FORK_FOLDER = "vllm/_fork/"  # a tree with files here is a fork tree, which must hold the refusal table
BROKEN = (UNDECLARED, NOT_IMPLEMENTED, ORACLE_FAILED)
NO_CAPTURE = "inner model captures no aux hidden states: EAGLE3-family drafters unsupported (use mtp, ngram or draft_model)"


@dataclass(frozen=True)
class Row:
    """One architecture (and, where platforms differ, one of its classes) with its verdict."""

    arch: str
    cls: str  # module.Class
    table: str
    status: AuditStatus
    reason: str = ""
    holder: str = ""
    passes_through: bool | None = None
    holder_classes: tuple[str, ...] = ()
    declared: bool | None = None  # declares SupportsEagle3 (None where not looked at)
    oracle: dict | None = None  # drafter loads and aux states vs Hugging Face, where tools/oracles built it

    def as_dict(self) -> dict:
        return asdict(self)


def _verdict(declared: bool, implemented: bool | None) -> AuditStatus | None:
    if implemented is None:
        return None
    if declared:
        return WORKS if implemented else NOT_IMPLEMENTED
    return UNDECLARED if implemented else NOT_APPLICABLE_STATUS


def refused_architectures(tree: SourceTree) -> set[str]:
    """Architectures the tree's fork overlay refuses at config time (empty for an upstream tree).

    A fork tree (one with vllm/_fork) without the table, or with a table that is not a dict literal of
    architecture names, is an error: an empty set would silently turn every refusal into "broken"."""
    if not any(path.startswith(FORK_FOLDER) for path in tree.paths):
        return set()
    module = tree.module(REFUSAL_MODULE)
    if module is None:
        raise ForkError(f"fork tree without {REFUSAL_MODULE}: the audit reads the refusal table "
                        f"{REFUSAL_TABLE} there; restore the module or update forktool/audit/classify.py")
    for node in module.tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == REFUSAL_TABLE and isinstance(node.value, ast.Dict):
            keys = node.value.keys
            if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                return {k.value for k in keys}
    raise ForkError(f"{module.path}: no module-level dict literal {REFUSAL_TABLE} of architecture names; "
                    "the audit reads the fork's refusal table from it statically")


def classify(tree: SourceTree) -> list[Row]:
    """One row per architecture class of the registry in `tree`."""
    entries = read_registry(tree.read(REGISTRY_PATH))
    refused = refused_architectures(tree)
    registry = {e.arch: (e.module, e.cls) for e in entries}
    reader = ContractReader(tree, registry)
    rows = []
    for entry in entries:
        if entry.table in NOT_APPLICABLE:
            rows.append(Row(entry.arch, f"{entry.module}.{entry.cls}", entry.table, NOT_APPLICABLE_STATUS,
                            NOT_APPLICABLE[entry.table]))
            continue
        refs = tree.resolve(entry.module, entry.cls)
        if not refs:
            rows.append(Row(entry.arch, f"{entry.module}.{entry.cls}", entry.table, UNRESOLVABLE,
                            f"class not found in {entry.module}"))
            continue
        for ref in refs:
            contract = reader.contract(ref)
            status = _verdict(contract.declared, contract.implemented)
            reason = contract.reason
            modules = [ref.module, *(key.rpartition(".")[0] for key in contract.holder_classes)]
            unsupported = unsupported_reason(tree, modules) or (STUB_REASON if is_stub(ref) else "")
            if unsupported:
                status, reason = UNSUPPORTED, unsupported
            elif status is None:
                status = UNRESOLVABLE
            elif status == NOT_APPLICABLE_STATUS:
                reason = f"{reason}: {NO_CAPTURE}" if reason else NO_CAPTURE
                if ref.key in NOT_CAPTURED:  # named: why the fork leaves it so
                    reason = f"{reason}: {NOT_CAPTURED[ref.key]}"
            elif status == NOT_IMPLEMENTED and entry.arch in refused:
                status, reason = REFUSED, f"config validation refuses aux-state methods ({reason or contract.holder})"
            rows.append(Row(entry.arch, ref.key, entry.table, status, reason, contract.holder,
                            contract.passes_through, contract.holder_classes, contract.declared))
    return rows


def against_baseline(fork: list[Row], upstream: list[Row]) -> list[Row]:
    """Mark rows that are broken upstream and work on the fork as fixed by the fork."""
    before = {(r.arch, r.cls): r.status for r in upstream}
    return [Row(**{**r.as_dict(), "status": FIXED, "reason": f"upstream: {before[(r.arch, r.cls)]}"})
            if r.status == WORKS and before.get((r.arch, r.cls)) in BROKEN else r for r in fork]


def is_generation(row: Row) -> bool:
    """Text or multimodal generation, the Transformers backend's causal LMs included."""
    return row.table in GENERATION_TABLES or (row.table in TRANSFORMERS_TABLES and "CausalLM" in row.cls)
