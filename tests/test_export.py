"""`export-pr`: one deterministic patch per spec file with live edits; it applies to upstream with git."""

from __future__ import annotations

import subprocess
import zipfile

from conftest import run_forktool

EDITED = "vllm/models/kimi_k3/amd/linear.py"


def test_series_is_deterministic_and_applies_to_upstream(upstream_wheel, tmp_path, project, fork_wheel):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        done = run_forktool("export-pr", "--out", str(out))
        assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert all((first / n).read_bytes() == (second / n).read_bytes() for n in names)
    # One patch per spec with live edits; absorbed guards and specs using the fork-only overlay give none.
    assert len(names) == 30  # 26 declarations, ROCm Kimi-K3, two GLM-5.3-Flash MTP fixes, the drafter load fix
    assert not any("qwen3-next" in n or "name-the-model" in n or "refuse" in n for n in names)
    assert sorted(done.stderr.splitlines()) == [
        f"not exported: edits/{spec}.toml (uses vllm._fork, which stays in the fork)"
        for spec in ("vllm/config/speculative.py", "vllm/entrypoints/cli/main.py", "vllm/v1/core/kv_cache_planning.py",
                     "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "vllm/v1/worker/gpu_model_runner.py")]
    [patch] = [first / n for n in names if "rocm-xpu-kimilinear" in n]
    text = patch.read_text()
    assert "] [Bugfix] Declare SupportsEagle3 on the ROCm/XPU KimiLinearForCausalLM\n" in text
    for edit in [e for e in project.edits() if e.target == EDITED]:
        assert f"Why: {edit.why}" in text and f"Upstream: {edit.upstream}" in text
        assert f"Remove when: {edit.remove_when}" in text
    # git applies the whole series to the pristine upstream files; each result equals the built fork's file.
    work = tmp_path / "upstream"
    touched = [line[len("+++ b/"):] for n in names for line in (first / n).read_text().splitlines()
               if line.startswith("+++ b/")]
    assert EDITED in touched
    with zipfile.ZipFile(upstream_wheel[0]) as wheel:
        for path in touched:
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_bytes(wheel.read(path))
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    series = [str(first / n) for n in names]
    done = subprocess.run(["git", "apply", "--check", *series], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    subprocess.run(["git", "apply", *series], cwd=work, check=True)
    with zipfile.ZipFile(fork_wheel) as fork:
        for path in touched:
            assert (work / path).read_bytes() == fork.read(path), path
