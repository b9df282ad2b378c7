"""What one architecture's oracle results depend on, as a digest: stale when any of it changes.

The pins (upstream, the CPU base, the transformers both environments lock), the oracle's own code, the fork's
overlay for the capture, and the code the oracles ran: every upstream file the built target is made of (the
modules recorded when it was built) or the drafter loaders and runners are made of, as the fork builds it on each
base (the edits applied, as forktool/apply.py writes them before the build formats them; the formatter's code, ruff
pin and settings are in the key instead, so a cold key needs no ruff run). An edit to gemma3.py stales Gemma-3's
rows, not GPT-2's; rewording an edit's `why`, or moving its import into `imports = [...]`, stales none.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import zipfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import fixes  # noqa: E402  (this folder: the per-architecture corrections and stand-ins)
import targets as stand_ins  # noqa: E402
from forktool.apply import apply_edits  # noqa: E402
from forktool.fetch import fetch  # noqa: E402
from forktool.options import BuildOptions  # noqa: E402
from forktool.project import Project  # noqa: E402
from forktool.sourcetree import SourceTree  # noqa: E402
from forktool.vocabulary import EditStatus  # noqa: E402

PINS = ("requirements/upstream.txt", "requirements/cpu-base.txt")  # runner V2 runs on the first, V1 on the second
LOCKS = ("requirements/test.txt", "requirements/cpu-test.txt")  # only their transformers line
# The oracles' own code; fixes.py and targets.py count per architecture (only its own fix and stand-in). The
# verdicts the build reads (verdicts.py) and the tables (table.py) are made from records, not by the runs.
ORACLE_CODE = ("tools/oracles/compare.py", "tools/oracles/configs.py", "tools/oracles/drafts.py",
               "tools/oracles/engines_v1.py", "tools/oracles/loaders_v2.py", "tools/oracles/merge.py",
               "tools/oracles/reference.py", "tools/oracles/shrink.py", "tools/oracles/wiring.py",
               "tests/scripts/gpu_dry_build.py", "benchmarks/glm5_kv/sm90_stub.py")
# Upstream files whose edits change every architecture's drafter load or capture path.
LOADERS = ("vllm/v1/spec_decode/", "vllm/v1/worker/gpu/spec_decode/", "vllm/v1/worker/gpu/model_runner.py",
           "vllm/v1/worker/gpu_model_runner.py", "vllm/model_executor/models/interfaces.py",
           "vllm/config/speculative.py", "vllm/transformers_utils/configs/extract_hidden_states.py")
FORK_FILES = ("vllm/_fork/eagle3.py",)
# What turns the applied text into the shipped text: the build's formatter, its ruff pin and upstream's settings.
FORMATTER = ("forktool/format.py", "requirements/engine.txt", "requirements/upstream-ruff.toml")


def _transformers_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.startswith("transformers==")), "")


def module_path(module: str) -> str:
    """`vllm.model_executor.models.gpt2` -> `vllm/model_executor/models/gpt2.py`."""
    return module.replace(".", "/") + ".py"


def per_arch_code(arch: str) -> str:
    """The source of this architecture's own correction and stand-in, as the key reads them."""
    fix = fixes.FIXES.get(stand_ins.ALIASES.get(arch, arch))
    return "\n".join([inspect.getsource(fix) if fix else "", repr(stand_ins.ALIASES.get(arch)),
                      repr(stand_ins.CONFIG_ONLY.get(arch))])


def _edited_paths(modules: list[str], targets: set[str]) -> set[str]:
    """The edited upstream files an architecture's results depend on: its model modules and the loaders."""
    wanted = {module_path(m) for m in modules}
    return {t for t in targets if t in wanted or t.startswith(LOADERS)}


@cache
def _wheel(pin) -> Path:
    """The base's pinned wheel (its sha256 checked once per process)."""
    return fetch(pin.name, pin.version, "wheel", pin.hashes)[0]


def built_files(root: Path, paths: Iterable[str]) -> dict[str, str]:
    """{"<pin file> <upstream path>": its text with the fork's edits applied on that base} for each of `paths` an
    edit changes there (a path the base lacks, or no edit changes, is upstream's: the pin covers it)."""
    paths, built = set(paths), {}
    for pin_file in PINS:
        project = Project(root, pin_file)
        options = BuildOptions.from_flags(project.pin.build_flags, pin_file)
        edits = [e for e in project.edits() if e.target in paths and f"{e.spec_file}:{e.id}" not in options.skip]
        wheel = _wheel(project.pin)
        with zipfile.ZipFile(wheel) as archive:
            tree = SourceTree.from_zip(archive)
            sources = {e.target: tree.read(e.target) for e in edits if e.target in tree.paths}
            missing = EditStatus.ABSENT if options.allow_absent else EditStatus.BROKEN
            changed, _ = apply_edits(sources, edits, missing)
        built |= {f"{pin_file} {path}": text for path, text in changed.items()}
    return built


def arch_keys(records: dict[str, list[str]], root: Path = ROOT) -> dict[str, str]:
    """{architecture: the digest of everything its oracle results depend on (16 hex digits)} for
    {architecture: the model modules it was built from}; the edits are applied once for all of them."""
    targets = {e.target for e in Project(root).edits()}
    needed = {arch: _edited_paths(modules, targets) for arch, modules in records.items()}
    built = built_files(root, set().union(*needed.values())) if needed else {}
    common = hashlib.sha256()

    def add(digest, label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + data + b"\0")

    for name in PINS + ORACLE_CODE + FORK_FILES + FORMATTER:
        path = root / name
        add(common, name, path.read_bytes() if path.is_file() else b"<absent>")
    for name in LOCKS:
        add(common, name, _transformers_line((root / name).read_text()).encode())
    keys = {}
    for arch, paths in needed.items():
        digest = common.copy()
        add(digest, "per-arch", per_arch_code(arch).encode())
        for label in sorted(f"{pin} {path}" for pin in PINS for path in paths):
            add(digest, label, built[label].encode() if label in built else b"<upstream>")
        keys[arch] = digest.hexdigest()[:16]
    return keys


def arch_key(arch: str, modules: list[str], root: Path = ROOT) -> str:
    """The digest of everything one architecture's oracle results depend on (16 hex digits)."""
    return arch_keys({arch: modules}, root)[arch]
