"""The sdist's own pre-commit hooks, run offline on the files the PR series touches (without pre-commit itself,
which would clone each hook's repository and pip-install its environment).

Every hook of `.pre-commit-config.yaml` is either run here, with the tool at the version the config pins, or named
in OFFLINE_UNAVAILABLE with why it cannot run here; a hook of the second kind that would apply to a touched file is a
failure, never a silent skip. mypy runs as `tools/pre_commit/mypy.py` runs it, in the hook's own environment (the
config's additional_dependencies: no torch); its errors are compared with the unpatched tree's, by file and message
(line numbers move).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

# Hooks not run here, and why: a tool, the network or docker this machine lacks, or files the checkout (the sdist's
# Python files, Buildkite definitions and hook scripts) does not hold. Each must match no touched file.
OFFLINE_UNAVAILABLE = {
    "clang-format": "needs the clang-format binary (C++/CUDA only)",
    "markdownlint-cli2": "needs node and markdownlint-cli2 from npm (Markdown only)",
    "actionlint": "needs the actionlint binary (GitHub workflows only)",
    "shellcheck": "needs the shellcheck binary (shell scripts only)",
    "pip-compile": "uv resolves requirements against the package index (network; requirements/ only)",
    "png-lint": "needs oxipng (PNG only)",
    "test-nonroot-entrypoint": "runs docker entrypoint scripts (docker/entrypoints only)",
    "validate-docker-versions": "needs dockerfile-parse, not in the hook environment (docker/ only)",
    "rust-cargo-autoinherit": "needs cargo (rust/ only)",
    "rust-cargo-sort": "needs cargo (rust/ only)",
    "rust-cargo-fmt": "needs cargo (rust/ only)",
    "format-torch-nightly-test": "reads requirements/test/cuda.in, not in the checkout (requirements/ only)",
    "check-label-rules": "reads .github/mergify.yml, not in the checkout (that file only)",
    "check-agent-files": "reads agent instruction files, not in the checkout (those only)",
    "check-json": "pre-commit-hooks is not installed here (.buildkite/*.json only)",
}
# Hooks that need no files of ours: the commit-msg sign-off (the export test checks each patch's Signed-off-by)
# and the one that only prints advice.
NOT_FILE_HOOKS = {"signoff-commit", "suggestion"}
# What each remote hook's own .pre-commit-hooks.yaml (at the rev the config pins) selects; the config's keys
# override these, as pre-commit merges them. Local hooks carry everything in the config.
MANIFEST = {
    "ruff-check": {"types_or": ["python", "pyi", "jupyter"]},
    "ruff-format": {"types_or": ["python", "pyi", "jupyter"]},
    "typos": {"types": ["text"]},
    "clang-format": {"types_or": ["c++", "c", "c#", "cuda"]},
    "markdownlint-cli2": {"types": ["markdown"]},
    "actionlint": {"types": ["yaml"], "files": r"^\.github/workflows/"},
    "shellcheck": {"types": ["shell"]},
    "pip-compile": {"files": r"^requirements\.(in|txt)$"},
    "check-json": {"types": ["json"]},
}
_TYPES = {".py": {"python", "text", "file"}, ".pyi": {"pyi", "python", "text", "file"},
          ".yaml": {"yaml", "text", "file"}, ".yml": {"yaml", "text", "file"}, ".toml": {"toml", "text", "file"}}


def hooks(work: Path) -> list[dict]:
    config = yaml.safe_load((work / ".pre-commit-config.yaml").read_text())
    found = []
    for repo in config["repos"]:
        for hook in repo["hooks"]:
            if repo["repo"] != "local" and hook["id"] not in MANIFEST:
                raise AssertionError(f"hook {hook['id']} of {repo['repo']}: add what its manifest selects to MANIFEST")
            defaults = MANIFEST.get(hook["id"], {}) if repo["repo"] != "local" else {}
            found.append({**defaults, **hook, "repo": repo["repo"], "rev": repo.get("rev")})
    return found


def applies(hook: dict, path: str, exclude: str) -> bool:
    """pre-commit's file selection for one hook: files/exclude regexes and the types/types_or tags."""
    tags = _TYPES.get(Path(path).suffix)
    if tags is None:
        raise AssertionError(f"{path}: no file type known for it here; add its pre-commit tags to _TYPES")
    if re.search(exclude, path) or hook.get("exclude") and re.search(hook["exclude"], path):
        return False
    if hook.get("files") and not re.search(hook["files"], path):
        return False
    return set(hook.get("types", [])) <= tags and (not hook.get("types_or") or bool(tags & set(hook["types_or"])))


def _run(command: list[str], work: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=work, capture_output=True, text=True, env=env)


def run_hook(hook: dict, files: list[str], work: Path, tools: Path) -> subprocess.CompletedProcess:
    """One hook (not mypy: see run_mypy) over its files with the pinned tool."""
    bin_dir = Path(sys.executable).parent
    hid = hook["id"]
    files = files if hook.get("pass_filenames", True) else []
    if hid == "ruff-check":
        return _run([sys.executable, "-m", "ruff", "check", "--no-cache", *files], work)
    if hid == "ruff-format":
        return _run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *files], work)
    if hid == "typos":
        return _run([str(bin_dir / "typos"), *hook.get("args", []), *files], work)
    entry = hook["entry"].split()
    if hook["language"] == "python" and hook["repo"] == "local" and entry[0] == "python":
        return _run([str(tools / "python"), *entry[1:], *hook.get("args", []), *files], work)
    if hook["language"] == "system" and hook["entry"] == "bash":
        return _run(["bash", *hook["args"]], work)
    if hook["language"] == "script" and entry[0].endswith(".sh"):
        return _run(["bash", *entry, *hook.get("args", []), *files], work)
    raise AssertionError(f"hook {hid} is neither run here nor listed in OFFLINE_UNAVAILABLE")


def _errors(output: str) -> Counter:
    """mypy's errors by (file, message): line numbers move when a patch adds lines above an old error."""
    found = re.findall(r"^(\S+?\.pyi?):\d+: error: (.*)$", output, re.MULTILINE)
    return Counter(found)


def run_mypy(hook: dict, files: list[str], work: Path, tools: Path, cache: Path, site_python: Path | None) -> str:
    """`tools/pre_commit/mypy.py` as the hook runs it (its `mypy` first on PATH); with site_python, mypy sees
    that interpreter's packages. mypy's own cache (`cache`) is kept between runs: it re-checks every entry
    against the source's hash, so a stale entry is never used."""
    shim = cache / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    extra = f"--python-executable {site_python} " if site_python else ""
    (shim / "mypy").write_text(f'#!/bin/sh\nexec "{tools / "mypy"}" {extra}--cache-dir "{cache / "mypy"}" "$@"\n')
    (shim / "mypy").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{tools}:{os.environ['PATH']}")
    entry = hook["entry"].split()
    done = _run([str(tools / "python"), entry[1], *[a.strip('"') for a in entry[2:]], *files], work, env)
    output = done.stdout + done.stderr
    # Each group the hook ran ends in mypy's verdict; anything else (a crash, a missing plugin) is no result.
    groups = len(re.findall(r"^\$ mypy ", output, re.MULTILINE))
    verdicts = len(re.findall(r"^(Success: no issues found|Found \d+ errors?) in ", output, re.MULTILINE))
    assert groups and verdicts == groups, f"mypy gave no verdict for every group:\n{output[-3000:]}"
    return output


def new_errors(base: str, patched: str) -> list[str]:
    """The patched tree's mypy errors that the unpatched tree does not have (as many times)."""
    extra = _errors(patched) - _errors(base)
    return [f"{path}: {message}" for (path, message), count in sorted(extra.items()) for _ in range(count)]
