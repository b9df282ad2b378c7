"""The oracle results (tools/oracles/results.json) merged into the audit: a row that was built and run gets its
verdict from the real drafter loaders and from Hugging Face's hidden states, not from the static resolver.

Each record keeps the release it was made on. A verdict from records made on another release than the one being
built stands, and says "not re-proven on this base": stale evidence is reported, never fatal (a new release makes
every record stale at once). `python tools/oracles/run.py --stale` re-runs what changed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from forktool.audit.classify import Row
from forktool.vocabulary import AuditStatus, OracleStatus, made_on_another_release

RESULTS = Path(__file__).resolve().parents[2] / "tools" / "oracles" / "results.json"
METHODS = ("eagle3", "dflash", "dspark", "extract_hidden_states")
STATIC_SUPPORTED = (AuditStatus.WORKS, AuditStatus.FIXED, AuditStatus.UNRESOLVABLE)
INTERFACE_ERROR = "does not support EAGLE3 interface"
RAN = (OracleStatus.PASS, OracleStatus.FAIL)


def load(path: Path = RESULTS) -> dict:
    """Architecture -> its oracle record, each with `made_on`, the release it ran on ({} when the file is absent)."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {arch: {**record, "made_on": record.get("made_on", data["base"])}
            for arch, record in data["architectures"].items()}


def not_reproven(record: dict, base: str) -> str:
    """The note a verdict carries when its record was made on another release than `base` ('' when the same)."""
    made_on = record.get("made_on", "")
    return f"oracles ran on {made_on}: not re-proven on this base" if made_on_another_release(made_on, base) else ""


def method_verdict(runs: dict) -> tuple[OracleStatus, str]:
    """One method over both runners: fails if either failed, passes if one passed and none failed."""
    statuses = {runner: OracleStatus(value[0]) for runner, value in runs.items()}
    failed = [runner for runner, status in statuses.items() if status == OracleStatus.FAIL]
    if failed:
        return OracleStatus.FAIL, f"runner {failed[0]}: {runs[failed[0]][1]}"
    if OracleStatus.PASS in statuses.values():
        return OracleStatus.PASS, ""
    return OracleStatus.NOT_BUILT, "; ".join(f"runner {r}: {v[1]}" for r, v in runs.items() if v[1])


def summary(record: dict) -> dict:
    """{method: (status, why)} and the Hugging Face comparison, as the contract table and the docs show them."""
    loaders = {m: method_verdict(record["loaders"][m]) for m in METHODS if m in record.get("loaders", {})}
    hf = record.get("hf") or [OracleStatus.NOT_COMPARABLE, "no reference run", ""]
    return {"loaders": {m: [str(s), why] for m, (s, why) in loaders.items()}, "hf": [str(hf[0]), *hf[1:]],
            "made_on": record.get("made_on", "")}


def _refused_on_the_pin(record: dict) -> bool:
    """Runner V2, built on the pinned release, refuses every method for want of SupportsEagle3 (whatever runner V1
    on the older CPU base met first)."""
    runs = [record["loaders"][m]["v2"] for m in METHODS if m in record.get("loaders", {})]
    return bool(runs) and all(OracleStatus(s) == OracleStatus.FAIL and INTERFACE_ERROR in why for s, why in runs)


def _verdict(row: Row, record: dict) -> tuple[AuditStatus, str]:
    """The row's status once its oracles ran: the static verdict stands only where the oracles agree."""
    found = summary(record)
    loaders = {m: (OracleStatus(s), why) for m, (s, why) in found["loaders"].items()}
    failed = {m: why for m, (s, why) in loaders.items() if s == OracleStatus.FAIL}
    ran = [m for m, (s, _) in loaders.items() if s in RAN]
    hf_status, hf_why = OracleStatus(found["hf"][0]), found["hf"][1]
    refused = ran and len(failed) == len(ran) and all(INTERFACE_ERROR in why for why in failed.values())
    if refused or _refused_on_the_pin(record):
        # Not called broken: whether its forward hands the decoder's output on unchanged is not what the oracles see.
        note = ("; its decoder records aux states: a SupportsEagle3 declaration is the candidate fix"
                if record.get("inner_captures") else "")
        return AuditStatus.NOT_APPLICABLE, f"built: the runner refuses it (does not declare SupportsEagle3){note}"
    if hf_status == OracleStatus.FAIL:
        return AuditStatus.ORACLE_FAILED, f"aux states differ from Hugging Face's: {hf_why}"
    if ran and len(failed) == len(ran):
        method, why = next(iter(failed.items()))
        return AuditStatus.ORACLE_FAILED, f"every drafter load fails ({method}: {why[:200]})"
    if not ran:
        return row.status, row.reason
    notes = [f"{hf_status}: {hf_why}" if hf_why else str(hf_status)]
    notes += [f"{m} fails ({why[:160]})" for m, why in failed.items()]
    # A row whose language model comes from the checkpoint stays unresolved: the oracles proved the one they built
    # (spec-check still decides by the checkpoint's text architecture).
    built = ", ".join(record.get("capture_at") or []) or "the default one"
    prefix = (f"with the language model the oracles built ({built}): " if row.status == AuditStatus.UNRESOLVABLE
              else f"{row.reason}; " if row.reason else "")
    return row.status, f"{prefix}oracles: drafters load ({', '.join(m for m in ran if m not in failed)}); " \
                       f"aux states vs Hugging Face {'; '.join(notes)}"


def apply(rows: list[Row], results: dict, base: str = "") -> list[Row]:
    """Rows whose class the oracles built take the oracles' verdict; the others keep the static one. With `base`
    (the release being built), a verdict from records made on another release says it is not re-proven."""
    merged = []
    for row in rows:
        record = results.get(row.arch)
        if record is None or row.cls not in record.get("built", {}).values() or row.status not in STATIC_SUPPORTED:
            merged.append(row)
            continue
        status, reason = _verdict(row, record)
        if note := not_reproven(record, base):
            reason = f"{reason} ({note})" if reason else note
        merged.append(replace(row, status=status, reason=reason, oracle=summary(record)))
    return merged
