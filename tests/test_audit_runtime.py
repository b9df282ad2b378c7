"""The static audit agrees with the classes as Python loads them (the installed fork, on the CPU)."""

from __future__ import annotations

import pytest

from fork_testing import load_class
from forktool.audit.classify import is_generation
from forktool.vocabulary import AuditStatus as S

# Rows come from classify() on the fork tree alone, never compared with upstream: "fixed by fork" cannot occur.
LOOKED_AT = (S.WORKS, S.UNDECLARED, S.NOT_IMPLEMENTED, S.REFUSED, S.NOT_APPLICABLE)
CAPTURES = (S.WORKS, S.UNDECLARED)


@pytest.fixture(scope="module")
def fork_rows(fork_audit):
    """The fork's audit rows that were looked at (the session's one classification)."""
    return [r for r in fork_audit.fork if r.declared is not None]


def test_declared_and_implemented_match_the_loaded_classes(fork_rows):
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

    checked, unimportable, disagreements = 0, {}, []
    for row in fork_rows:
        try:
            cls = load_class(row.cls)
            holders = [load_class(key) for key in row.holder_classes]
        except Exception as exc:  # noqa: BLE001 - ROCm/TPU-only modules do not import on the CPU
            unimportable[row.cls] = f"{type(exc).__name__}: {exc}"[:120]
            continue
        checked += 1
        if bool(supports_eagle3(cls)) != row.declared:
            disagreements.append(f"{row.cls}: static declared={row.declared}, runtime={supports_eagle3(cls)}")
        if row.status in LOOKED_AT and holders and "custom setter" not in row.holder:
            runtime = all(issubclass(h, EagleModelMixin) for h in holders)
            # A mixin whose forward never captures is not implemented statically; at run time it is
            # still a mixin, which is exactly why the runner's assert cannot catch it.
            static = row.status in CAPTURES or "never captures" in row.reason
            if runtime != static:
                disagreements.append(f"{row.cls}: holder {row.holder} static mixin={static}, runtime={runtime}")
    print(f"checked {checked} classes at run time; not importable on the CPU: {len(unimportable)}")
    for cls, why in sorted(unimportable.items()):
        print(f"  {cls}: {why}")
    assert disagreements == []
    assert checked >= 0.9 * len(fork_rows), unimportable


def test_declared_if_and_only_if_the_decoder_accepts_aux_layers(fork_rows):
    """On the fork, supports_eagle3(cls) holds exactly when the protocol's setter would accept the decoder;
    the only declared-but-not-accepting classes are the ones config validation refuses."""
    from vllm._fork.eagle3 import NOT_IMPLEMENTED
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

    # One test over every row (not one per row): parametrizing needs the audit at collection time.
    rows = [r for r in fork_rows if is_generation(r) and r.holder_classes]
    checked, unimportable, wrong = 0, [], []
    for row in rows:
        try:
            cls = load_class(row.cls)
            holders = [load_class(key) for key in row.holder_classes]
        except Exception as exc:  # noqa: BLE001 - platform-only modules (ROCm, TPU, CUDA FA) do not import here
            unimportable.append(f"{row.cls}: {type(exc).__name__}: {exc}"[:200])
            continue
        checked += 1
        custom = "custom setter" in row.holder
        accepts = custom or all(issubclass(h, EagleModelMixin) for h in holders)
        captures = accepts and "never captures" not in row.reason
        if row.arch in NOT_IMPLEMENTED:
            ok = supports_eagle3(cls) and not captures and row.status == S.REFUSED
        else:
            ok = bool(supports_eagle3(cls)) == captures
        if not ok:
            wrong.append(f"{row.arch}@{row.cls}: declared={bool(supports_eagle3(cls))}, captures={captures}, "
                         f"status={row.status}, holder={row.holder}")
    print(f"checked {checked} generation rows; not importable on the CPU: {len(unimportable)}", *unimportable,
          sep="\n  ")
    assert wrong == []
    assert checked >= 0.9 * len(rows), unimportable
