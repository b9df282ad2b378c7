"""tools/oracles/verdicts.json: per architecture what the oracles built and found, the one oracle file the build reads.

Made from the full records (results.json) by `python tools/oracles/run.py` (or `--tables-only`): one line per
architecture, no machine paths, reviewable in a diff. Each entry says which classes an oracle built, each method's
drafter load over both runners, the comparison with Hugging Face, the strongest evidence a pass rests on, and, where
the evidence is old, why it is not re-proven: the record was made on another release, or what it depends on
changed since (its key, keys.py, no longer matches). Marking is never fatal: a stale row keeps its verdict and says
so, until `run.py --stale` runs it again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from forktool.vocabulary import Evidence, OracleStatus as S, made_on_another_release  # noqa: E402
from merge import INTERFACE_ERROR, METHODS  # noqa: E402  (the records' own methods and refusal words)
from targets import NOT_RECORDED  # noqa: E402

VERDICTS = HERE / "verdicts.json"
WHY = 300  # characters of a reason kept in the verdict file (the record keeps the whole line)


def method_verdict(runs: dict) -> list:
    """One method over both runners: fails if either failed, passes if one passed and none failed."""
    statuses = {runner: S(value[0]) for runner, value in runs.items()}
    failed = [runner for runner, status in statuses.items() if status == S.FAIL]
    if failed:
        return [str(S.FAIL), f"runner {failed[0]}: {runs[failed[0]][1]}"[:WHY]]
    if S.PASS in statuses.values():
        return [str(S.PASS), ""]
    return [str(S.NOT_BUILT), "; ".join(f"runner {r}: {v[1]}" for r, v in runs.items() if v[1])[:WHY]]


def evidence(record: dict) -> Evidence:
    """The strongest oracle evidence the record has: states compared, an engine that ran, or a meta build."""
    runs = record.get("loaders", {}).values()
    if S(record["hf"][0]) == S.PASS:
        return Evidence.HF_STATES
    if any(S(r["v1"][0]) == S.PASS for r in runs):
        return Evidence.CPU_ENGINE
    if any(S(r["v2"][0]) == S.PASS for r in runs):
        return Evidence.META_BUILD
    return Evidence.NONE


def _not_built(record: dict) -> str:
    """Why nothing was built, in the record's own words."""
    if record.get("not_built"):
        return record["not_built"]
    whys = [why for runs in record.get("loaders", {}).values() for _, why in runs.values() if why]
    return (whys[0] if whys else record["hf"][1])[:WHY]


def entry(record: dict) -> dict:
    """What the build needs of one record: built classes, answers, evidence (no per-runner detail)."""
    v2 = [record["loaders"][m]["v2"] for m in METHODS if m in record.get("loaders", {})]
    return {"built": sorted(set(record.get("built", {}).values())), "capture_at": record.get("capture_at") or [],
            "inner_captures": bool(record.get("inner_captures")),
            "loaders": {m: method_verdict(record["loaders"][m]) for m in METHODS if m in record.get("loaders", {})},
            "refused_on_the_pin": bool(v2) and all(S(s) == S.FAIL and INTERFACE_ERROR in why for s, why in v2),
            "hf": [str(S(record["hf"][0])), record["hf"][1][:WHY]], "evidence": str(evidence(record)),
            "made_on": record.get("made_on", ""), "key": record.get("key", ""),
            "not_built": "" if record.get("built") else _not_built(record)}


def not_reproven(record: dict, base: str, current_key: str | None) -> str:
    """Why the record's verdict is not re-proven on `base` with today's inputs ('' when it is)."""
    if made_on_another_release(record.get("made_on", ""), base):
        return f"oracles ran on {record['made_on']}: not re-proven on this base"
    if current_key is not None and current_key != record.get("key"):
        return "what it depends on changed since the oracles ran: not re-proven (tools/oracles/run.py --stale)"
    return ""


def verdicts(results: dict, base: str, keys: dict[str, str] | None = None) -> dict:
    """{architecture: entry} for every record (marked against `keys`, today's, where given) and every
    architecture left out on purpose (nothing built, the reason)."""
    table = {arch: entry(record) | {"not_reproven": not_reproven(record, base, (keys or {}).get(arch))}
             for arch, record in results.items()}
    for arch, why in NOT_RECORDED.items():
        table[arch] = {"built": [], "not_built": f"left out of the oracles on purpose: {why}"}
    return table


def render(table: dict, base: str) -> str:
    """The file: one architecture per line, sorted."""
    lines = [f"  {json.dumps(arch)}: {json.dumps(table[arch], sort_keys=True)}" for arch in sorted(table)]
    return "{\n" + f'  "base": {json.dumps(base)},\n' + '  "architectures": {\n' + ",\n".join(
        "  " + line for line in lines) + "\n  }\n}\n"


def current_keys(results: dict) -> dict[str, str]:
    """Each record's key as today's checkout computes it (applies the edits: seconds, not part of the build)."""
    from keys import arch_keys

    return arch_keys({arch: record["modules"] for arch, record in results.items()})


def write(results: dict, base: str, path: Path = VERDICTS, keys: dict[str, str] | None = None) -> dict:
    """verdicts.json from the records, each marked against today's keys."""
    table = verdicts(results, base, current_keys(results) if keys is None else keys)
    path.write_text(render(table, base))
    return table
