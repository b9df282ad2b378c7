"""`export-pr`: one deterministic patch per spec file with live edits; it applies to upstream with git."""

from __future__ import annotations

import subprocess
import zipfile

from conftest import run_forktool

EDITED = "vllm/models/kimi_k3/amd/linear.py"


def test_series_is_deterministic_and_applies_to_upstream(upstream_wheel, tmp_path, project):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        done = run_forktool("export-pr", "--out", str(out))
        assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert all((first / n).read_bytes() == (second / n).read_bytes() for n in names)
    # Absorbed guards produce no patch: only the ROCm Kimi-K3 spec has live edits on 0.33.0.
    [patch] = [first / n for n in names]
    text = patch.read_text()
    assert "Subject: [PATCH 1/1] [Bugfix] Declare SupportsEagle3 on the ROCm/XPU KimiLinearForCausalLM\n" in text
    for edit in [e for e in project.edits() if e.target == EDITED]:
        assert f"Why: {edit.why}" in text and f"Upstream: {edit.upstream}" in text
        assert f"Remove when: {edit.remove_when}" in text
    # git applies it to the pristine upstream file and the result equals the built fork's file.
    work = tmp_path / "upstream"
    with zipfile.ZipFile(upstream_wheel[0]) as wheel:
        (work / EDITED).parent.mkdir(parents=True)
        (work / EDITED).write_bytes(wheel.read(EDITED))
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    done = subprocess.run(["git", "apply", "--check", str(patch)], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    subprocess.run(["git", "apply", str(patch)], cwd=work, check=True)
    build = run_forktool("build", "--out", str(tmp_path / "dist"))
    assert build.returncode == 0, build.stderr
    with zipfile.ZipFile(build.stdout.strip()) as fork:
        assert (work / EDITED).read_bytes() == fork.read(EDITED)
