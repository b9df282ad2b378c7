"""What one architecture's oracle results depend on, as a digest: stale when any of it changes.

The pins (upstream, the CPU base, the transformers both environments lock), the oracle's own code, the fork's
edits and overlay for the drafter loaders and the runners, and the edits to the model files the built target
is made of (the modules recorded when it was built). An edit to gemma3.py stales Gemma-3's rows, not GPT-2's.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = ("requirements/upstream.txt", "requirements/cpu-base.txt")
LOCKS = ("requirements/test.txt", "requirements/cpu-test.txt")  # only their transformers line
# The oracles' own code; fixes.py and targets.py count per architecture (only its own fix and stand-in).
ORACLE_CODE = ("tools/oracles/compare.py", "tools/oracles/configs.py", "tools/oracles/drafts.py",
               "tools/oracles/engines_v1.py", "tools/oracles/loaders_v2.py", "tools/oracles/reference.py",
               "tools/oracles/shrink.py", "tests/scripts/gpu_dry_build.py", "benchmarks/glm5_kv/sm90_stub.py")
PER_ARCH = ROOT / "tools" / "oracles"
# Upstream files whose edits change every architecture's drafter load or capture path.
LOADERS = ("vllm/v1/spec_decode/", "vllm/v1/worker/gpu/spec_decode/", "vllm/v1/worker/gpu/model_runner.py",
           "vllm/v1/worker/gpu_model_runner.py", "vllm/model_executor/models/interfaces.py",
           "vllm/config/speculative.py", "vllm/transformers_utils/configs/extract_hidden_states.py")
FORK_FILES = ("vllm/_fork/eagle3.py",)
SPEC_SUFFIXES = (".fork.toml", ".toml")


def _transformers_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.startswith("transformers==")), "")


def _upstream_path(spec: Path, root: Path) -> str:
    name = spec.relative_to(root / "edits").as_posix()
    return next(name[: -len(s)] for s in SPEC_SUFFIXES if name.endswith(s))


def _specs(root: Path) -> dict[str, list[Path]]:
    """Upstream path -> its spec files."""
    found: dict[str, list[Path]] = {}
    for spec in sorted((root / "edits").rglob("*.toml")):
        found.setdefault(_upstream_path(spec, root), []).append(spec)
    return found


def module_path(module: str) -> str:
    """`vllm.model_executor.models.gpt2` -> `vllm/model_executor/models/gpt2.py`."""
    return module.replace(".", "/") + ".py"


@cache
def _per_arch_tables(folder: Path) -> tuple[dict, dict, dict]:
    """tools/oracles' FIXES, ALIASES and CONFIG_ONLY (pure Python: shrink.py's constants, no torch)."""
    sys.path.insert(0, str(folder))
    try:
        fixes, targets = (importlib.import_module(name) for name in ("fixes", "targets"))
    finally:
        sys.path.remove(str(folder))
    return fixes.FIXES, targets.ALIASES, targets.CONFIG_ONLY


def per_arch_code(arch: str, folder: Path = PER_ARCH) -> str:
    """The source of this architecture's own correction and stand-in, as the key reads them."""
    fixes, aliases, config_only = _per_arch_tables(folder)
    fix = fixes.get(aliases.get(arch, arch))
    return "\n".join([inspect.getsource(fix) if fix else "", repr(aliases.get(arch)), repr(config_only.get(arch))])


def arch_key(arch: str, modules: list[str], root: Path = ROOT) -> str:
    """The digest of everything an architecture's oracle results depend on (16 hex digits)."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + data + b"\0")

    for name in PINS + ORACLE_CODE + FORK_FILES:
        path = root / name
        add(name, path.read_bytes() if path.is_file() else b"<absent>")
    for name in LOCKS:
        add(name, _transformers_line((root / name).read_text()).encode())
    add("per-arch", per_arch_code(arch, root / "tools" / "oracles").encode())
    wanted = {module_path(m) for m in modules}
    for upstream, specs in _specs(root).items():
        if upstream in wanted or upstream.startswith(LOADERS):
            for spec in specs:
                add(spec.relative_to(root).as_posix(), spec.read_bytes())
    return digest.hexdigest()[:16]
