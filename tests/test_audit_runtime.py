"""The static audit agrees with the classes as Python loads them (the installed fork, on the CPU)."""

from __future__ import annotations

import importlib
import zipfile

import pytest

from forktool.audit.classify import classify
from forktool.audit.run import fork_and_upstream


def _load(key: str):
    module, _, name = key.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.fixture(scope="module")
def fork_rows(project, upstream_wheel):
    with zipfile.ZipFile(upstream_wheel[0]) as wheel:
        return [r for r in classify(fork_and_upstream(project, wheel)[0]) if r.declared is not None]


def test_declared_and_implemented_match_the_loaded_classes(fork_rows):
    from vllm.model_executor.models.interfaces import EagleModelMixin, supports_eagle3

    checked, unimportable, disagreements = 0, {}, []
    for row in fork_rows:
        try:
            cls = _load(row.cls)
            holders = [_load(key) for key in row.holder_classes]
        except Exception as exc:  # noqa: BLE001 - ROCm/TPU-only modules do not import on the CPU
            unimportable[row.cls] = f"{type(exc).__name__}: {exc}"[:120]
            continue
        checked += 1
        if bool(supports_eagle3(cls)) != row.declared:
            disagreements.append(f"{row.cls}: static declared={row.declared}, runtime={supports_eagle3(cls)}")
        if row.status in ("works", "fixed by fork", "broken-undeclared", "broken-declared-not-implemented",
                          "refused by fork", "not applicable") and holders and "custom setter" not in row.holder:
            runtime = all(issubclass(h, EagleModelMixin) for h in holders)
            # A mixin whose forward never captures is not implemented statically; at run time it is
            # still a mixin, which is exactly why the runner's assert cannot catch it.
            static = row.status in ("works", "fixed by fork", "broken-undeclared") or "never captures" in row.reason
            if runtime != static:
                disagreements.append(f"{row.cls}: holder {row.holder} static mixin={static}, runtime={runtime}")
    print(f"checked {checked} classes at run time; not importable on the CPU: {len(unimportable)}")
    for cls, why in sorted(unimportable.items()):
        print(f"  {cls}: {why}")
    assert disagreements == []
    assert checked >= 0.9 * len(fork_rows), unimportable
