"""What each check found, the overall verdict, and the two ways to print them (text, --json)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

PASS, FAIL, WARN, INFO = "pass", "fail", "warn", "info"
EXIT_WILL_START, EXIT_WILL_FAIL, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """The question cannot be asked: missing path, malformed JSON, missing field (exit 2)."""


@dataclass(frozen=True)
class Finding:
    """One check's result: status, a one-line reason and, when it fails, the fix."""

    check: str
    status: str
    reason: str
    fix: str = ""


def exit_code(findings: list[Finding]) -> int:
    """0 when nothing fails (warnings included), 1 otherwise."""
    return EXIT_WILL_FAIL if any(f.status == FAIL for f in findings) else EXIT_WILL_START


def verdict_line(code: int) -> str:
    return {EXIT_WILL_START: "will start", EXIT_WILL_FAIL: "will fail", EXIT_BAD_INPUT: "bad input"}[code]


def as_text(findings: list[Finding], subject: str) -> str:
    """One line per check, the fix indented under a failure or warning, the verdict last."""
    lines = [f"spec-check {subject}"]
    for f in findings:
        lines.append(f"  [{f.status:4}] {f.check}: {f.reason}")
        if f.fix and f.status in (FAIL, WARN):
            lines.append(f"         fix: {f.fix}")
    lines.append(f"verdict: {verdict_line(exit_code(findings))}")
    return "\n".join(lines)


def as_json(findings: list[Finding], subject: str) -> str:
    code = exit_code(findings)
    return json.dumps({"subject": subject, "exit_code": code, "verdict": verdict_line(code),
                       "checks": [asdict(f) for f in findings]}, indent=1)


def bad_input_json(message: str) -> str:
    return json.dumps({"exit_code": EXIT_BAD_INPUT, "verdict": verdict_line(EXIT_BAD_INPUT), "error": message})
