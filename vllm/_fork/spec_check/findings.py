"""What each check found, the overall verdict, and the two ways to print them (text, --json)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from vllm._fork.vocabulary import CheckName, CheckStatus, Verdict

PASS, FAIL, WARN, INFO, UNKNOWN = (CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.WARN, CheckStatus.INFO,
                                   CheckStatus.UNKNOWN)


class BadInput(Exception):
    """The question cannot be asked: missing path, malformed JSON, missing field (exit 2)."""


class Refused(Exception):
    """vLLM refused the configuration at `step` (a check's name): a finding, not a fault."""

    def __init__(self, step: str, cause: BaseException):
        super().__init__(f"{step}: {cause}")
        self.step, self.cause = step, cause


class OwnFault(Exception):
    """spec-check itself failed inside one named check (exit 3): a bug, or a vLLM interface that moved."""

    def __init__(self, check: str, cause: BaseException):
        first = (str(cause).strip().splitlines() or [""])[0]
        super().__init__(f"{check}: {type(cause).__name__}: {first}".rstrip(": "))
        self.check, self.cause = check, cause


@contextmanager
def own_faults(check: str):
    """Anything `check` raises that is not BadInput is spec-check's own fault, never a finding."""
    try:
        yield
    except (BadInput, OwnFault, Refused):
        raise
    except Exception as exc:
        raise OwnFault(check, exc) from exc


@dataclass(frozen=True)
class Finding:
    """One check's result: status, a one-line reason and, when it fails or cannot tell, the fix."""

    check: str
    status: CheckStatus
    reason: str
    fix: str = ""
    detail: tuple[str, ...] = ()  # lines printed under the reason (the KV plan's table)
    data: dict | None = None  # the same, for --json


def verdict(findings: list[Finding]) -> Verdict:
    """Any failure: will fail; else any check that could not decide: cannot tell; else any warning: will start,
    but acceptance may collapse (or, when the KV plan alone warns, KV capacity is lost); else will start."""
    statuses = {f.status for f in findings}
    if FAIL in statuses:
        return Verdict.WILL_FAIL
    if UNKNOWN in statuses:
        return Verdict.CANNOT_TELL
    warned = {f.check for f in findings if f.status == WARN}
    if not warned:
        return Verdict.WILL_START
    return Verdict.WILL_START_LOW_CAPACITY if warned == {CheckName.KV_CACHE_PLAN} else Verdict.WILL_START_LOW_ACCEPTANCE


def exit_code(findings: list[Finding]) -> int:
    """0 when every check passed, informed or warned; 1 on a failure or a check that could not decide."""
    return int(verdict(findings).exit_code)


def as_text(findings: list[Finding], subject: str) -> str:
    """One line per check, the fix indented under a failure, a warning or an undecided check, the verdict last."""
    width = max(len(status) for status in CheckStatus)
    lines = [f"spec-check {subject}"]
    for f in findings:
        lines.append(f"  [{f.status:{width}}] {f.check}: {f.reason}")
        lines += [f"         {line}" for line in f.detail]
        if f.fix and f.status in (FAIL, WARN, UNKNOWN):
            lines.append(f"         fix: {f.fix}")
    lines.append(f"verdict: {verdict(findings)}")
    return "\n".join(lines)


def as_json(findings: list[Finding], subject: str) -> str:
    answer = verdict(findings)
    return json.dumps({"subject": subject, "exit_code": int(answer.exit_code), "verdict": str(answer),
                       "checks": [{k: v for k, v in asdict(f).items() if k != "detail"} for f in findings]},
                      indent=1)


def error_json(answer: Verdict, message: str, check: str | None = None) -> str:
    """Bad input or an own fault: the message alone, never findings."""
    extra = {"check": check} if check else {}
    return json.dumps({"exit_code": int(answer.exit_code), "verdict": str(answer), "error": message, **extra})


def bad_input_json(message: str) -> str:
    return error_json(Verdict.BAD_INPUT, message)

