"""The oracles' verdicts (tools/oracles/verdicts.json) merged into the audit: a generation row the fork calls
supported keeps *works* / *fixed by fork* only where an oracle built its class and passed; a row no oracle built is
*not proven*, with the reason.

The build reads only verdicts.json, a small generated file: no oracle code, no keys. An entry whose evidence is
old (made on another release, or its inputs changed since) keeps its verdict and says it is not re-proven: stale
evidence is reported, never fatal. `python tools/oracles/run.py --stale` re-runs what changed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from forktool.audit.classify import Row, is_generation
from forktool.vocabulary import AuditStatus, OracleStatus, made_on_another_release

VERDICTS = Path(__file__).resolve().parents[2] / "tools" / "oracles" / "verdicts.json"
METHODS = ("eagle3", "dflash", "dspark", "extract_hidden_states")
STATIC_SUPPORTED = (AuditStatus.WORKS, AuditStatus.FIXED, AuditStatus.UNRESOLVABLE)
PROVABLE = (AuditStatus.WORKS, AuditStatus.FIXED)  # what a generation row may only keep with an oracle's pass
INTERFACE_ERROR = "does not support EAGLE3 interface"
RAN = (OracleStatus.PASS, OracleStatus.FAIL)


def load(path: Path = VERDICTS) -> dict:
    """Architecture -> its verdict entry ({} when the file is absent)."""
    if not path.is_file():
        return {}
    return json.loads(path.read_text())["architectures"]


def not_reproven(found: dict, base: str) -> str:
    """The note a verdict carries when its evidence is not re-proven on `base` ('' when it is)."""
    if made_on_another_release(found.get("made_on", ""), base):
        return f"oracles ran on {found['made_on']}: not re-proven on this base"
    return found.get("not_reproven", "") if base else ""


def _not_proven(row: Row, found: dict | None) -> Row:
    """A supported-looking row no oracle built and passed: not proven, why, and what the static reading said."""
    if found is None:
        why = "no oracle has run it yet (python tools/oracles/run.py --stale)"
    elif found.get("built"):
        why = f"the oracles built {', '.join(found['built'])}, not this class"
    else:
        why = f"no oracle built it: {found.get('not_built') or 'nothing recorded'}"
    static = f"{row.status}" + (f": {row.reason}" if row.reason else "")
    return replace(row, status=AuditStatus.NOT_PROVEN, reason=f"{why} (static reading: {static})")


def _verdict(row: Row, found: dict) -> tuple[AuditStatus, str]:
    """The row's status once its oracles ran: the static verdict stands only where the oracles agree."""
    loaders = {m: (OracleStatus(s), why) for m, (s, why) in found["loaders"].items()}
    failed = {m: why for m, (s, why) in loaders.items() if s == OracleStatus.FAIL}
    ran = [m for m, (s, _) in loaders.items() if s in RAN]
    hf_status, hf_why = OracleStatus(found["hf"][0]), found["hf"][1]
    refused = ran and len(failed) == len(ran) and all(INTERFACE_ERROR in why for why in failed.values())
    if refused or found.get("refused_on_the_pin"):
        # Not called broken: whether its forward hands the decoder's output on unchanged is not what the oracles see.
        note = ("; its decoder records aux states: a SupportsEagle3 declaration is the candidate fix"
                if found.get("inner_captures") else "")
        return AuditStatus.NOT_APPLICABLE, f"built: the runner refuses it (does not declare SupportsEagle3){note}"
    if hf_status == OracleStatus.FAIL:
        return AuditStatus.ORACLE_FAILED, f"aux states differ from Hugging Face's: {hf_why}"
    if ran and len(failed) == len(ran):
        method, why = next(iter(failed.items()))
        return AuditStatus.ORACLE_FAILED, f"every drafter load fails ({method}: {why[:200]})"
    if not ran:
        if row.status in PROVABLE:
            whys = "; ".join(dict.fromkeys(why for _, why in loaders.values() if why))
            why = f"built, but no drafter load ran: {whys[:240]}"
            return AuditStatus.NOT_PROVEN, f"{why} (static reading: {row.status})"
        return row.status, row.reason
    notes = [f"{hf_status}: {hf_why}" if hf_why else str(hf_status)]
    notes += [f"{m} fails ({why[:160]})" for m, why in failed.items()]
    # A row whose language model comes from the checkpoint stays unresolved: the oracles proved the one they built
    # (spec-check still decides by the checkpoint's text architecture).
    built = ", ".join(found.get("capture_at") or []) or "the default one"
    prefix = (f"with the language model the oracles built ({built}): " if row.status == AuditStatus.UNRESOLVABLE
              else f"{row.reason}; " if row.reason else "")
    loaded = ", ".join(m for m in ran if m not in failed)
    return row.status, f"{prefix}oracles ({found['evidence']}): drafters load ({loaded}); " \
                       f"aux states vs Hugging Face {'; '.join(notes)}"


def apply(rows: list[Row], verdicts: dict, base: str = "") -> list[Row]:
    """Rows whose class an oracle built take the oracles' verdict; supported generation rows no oracle built are
    not proven; the rest keep the static verdict. With `base` (the release being built), a verdict whose evidence
    is old says it is not re-proven."""
    merged = []
    for row in rows:
        found = verdicts.get(row.arch)
        if row.status not in STATIC_SUPPORTED:
            merged.append(row)
        elif found is None or row.cls not in found.get("built", ()):
            merged.append(_not_proven(row, found) if is_generation(row) and row.status in PROVABLE else row)
        else:
            status, reason = _verdict(row, found)
            note = not_reproven(found, base)
            reason = f"{reason} ({note})" if note and reason else note or reason
            merged.append(replace(row, status=status, reason=reason, oracle=found | {"not_reproven": note}))
    return merged
