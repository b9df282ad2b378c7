"""The audit for people (a table with counts) and for machines (--json)."""

from __future__ import annotations

import json
from collections import Counter

from forktool.audit.classify import BROKEN, Row, is_generation
from forktool.vocabulary import AuditStatus

ORDER = (AuditStatus.WORKS, AuditStatus.FIXED, AuditStatus.NOT_PROVEN, AuditStatus.REFUSED, AuditStatus.UNDECLARED,
         AuditStatus.NOT_IMPLEMENTED, AuditStatus.ORACLE_FAILED, AuditStatus.UNRESOLVABLE, AuditStatus.UNSUPPORTED,
         AuditStatus.NOT_APPLICABLE)


def counts(rows: list[Row]) -> dict[str, dict[str, int]]:
    """Status counts for generation architectures and for the rest."""
    result = {}
    for scope, keep in (("generation", True), ("other", False)):
        tally = Counter(r.status for r in rows if is_generation(r) == keep)
        result[scope] = {str(status): tally.get(status, 0) for status in ORDER}
    return result


def as_json(rows: list[Row], tree_name: str, code: int | None = None) -> str:
    """The whole audit as one JSON object (statuses are the vocabulary's strings)."""
    data = {"tree": tree_name, "counts": counts(rows), "rows": [r.as_dict() for r in rows]}
    if code is not None:
        data["exit"] = code
    return json.dumps(data, indent=1, sort_keys=True)


def as_table(rows: list[Row], tree_name: str, verbose: bool = False) -> str:
    """Broken, fixed and unresolvable generation rows in full; the rest only counted unless verbose."""
    lines = [f"EAGLE3 contract audit of {tree_name}"]
    quiet = (AuditStatus.WORKS, AuditStatus.NOT_APPLICABLE)
    shown = [r for r in rows if verbose or (is_generation(r) and r.status not in quiet)]
    for row in sorted(shown, key=lambda r: (ORDER.index(r.status), r.arch)):
        note = row.reason or row.holder
        if row.passes_through is False:
            note += "; forward post-processes the inner output: check before declaring"
        lines.append(f"{row.status:32} {row.arch:46} {row.cls}  [{note}]")
    for scope, tally in counts(rows).items():
        lines.append(f"{scope}: " + ", ".join(f"{n} {s}" for s, n in tally.items() if n))
    broken = sum(1 for r in rows if is_generation(r) and r.status in BROKEN)
    lines.append(f"broken generation architectures: {broken}")
    return "\n".join(lines)
