"""The sdist's own pre-commit hooks, run offline on the files the PR series touches (without pre-commit itself,
which would clone each hook's repository and pip-install its environment).

Every hook of `.pre-commit-config.yaml` is either run here, with the tool at the version the config pins, or named
in OFFLINE_UNAVAILABLE with why it cannot run here; a hook of the second kind that would apply to a touched file is a
failure, never a silent skip. mypy runs as `tools/pre_commit/mypy.py` runs it, twice: in the hook's own environment
(no torch) and with the test environment's packages (torch, transformers), as a developer's editor has them. Its
errors are compared with the unpatched tree's, by file and message (line numbers move).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

# Hooks that cannot run on this machine, and why; each must match no touched file.
OFFLINE_UNAVAILABLE = {
    "clang-format": "needs the clang-format binary (C++/CUDA only)",
    "markdownlint-cli2": "needs node and markdownlint-cli2 from npm (Markdown only)",
    "actionlint": "needs the actionlint binary (GitHub workflows only)",
    "shellcheck": "needs the shellcheck binary (shell scripts only)",
    "pip-compile": "resolves requirements against the package index (network)",
    "png-lint": "needs oxipng (PNG only)",
    "update-dockerfile-graph": "renders the Dockerfile graph with docker (Dockerfile only)",
    "test-nonroot-entrypoint": "runs docker entrypoint scripts (docker/entrypoints only)",
    "validate-docker-versions": "needs dockerfile-parse (docker/ only)",
    "rust-cargo-autoinherit": "needs cargo (rust/ only)",
    "rust-cargo-sort": "needs cargo (rust/ only)",
    "rust-cargo-fmt": "needs cargo (rust/ only)",
    "format-torch-nightly-test": "rewrites requirements files (requirements/ only)",
    "check-label-rules": "reads .github/mergify.yml (that file only)",
    "check-agent-files": "reads agent instruction files (those only)",
    "check-json": "pre-commit-hooks' JSON check (.buildkite/*.json only)",
}
# Hooks that need no files of ours: the commit-msg sign-off (the export test checks each patch's Signed-off-by)
# and the one that only prints advice.
NOT_FILE_HOOKS = {"signoff-commit", "suggestion"}
_TYPES = {".py": {"python", "text", "file"}, ".pyi": {"pyi", "python", "text", "file"},
          ".yaml": {"yaml", "text", "file"}, ".yml": {"yaml", "text", "file"}, ".toml": {"toml", "text", "file"}}


def hooks(work: Path) -> list[dict]:
    config = yaml.safe_load((work / ".pre-commit-config.yaml").read_text())
    return [dict(hook, repo=repo["repo"], rev=repo.get("rev")) for repo in config["repos"] for hook in repo["hooks"]]


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


def run_hook(hook: dict, files: list[str], work: Path, tools: Path) -> subprocess.CompletedProcess | None:
    """One hook over its files with the pinned tool; None for mypy (run_mypy compares it with the base)."""
    bin_dir = Path(sys.executable).parent
    hid = hook["id"]
    if hid == "ruff-check":
        return _run([sys.executable, "-m", "ruff", "check", "--no-cache", *files], work)
    if hid == "ruff-format":
        return _run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *files], work)
    if hid == "typos":
        return _run([str(bin_dir / "typos"), *hook.get("args", []), *files], work)
    if hid == "mypy":
        return None
    if hook["language"] == "python" and hook["repo"] == "local":
        entry = hook["entry"].split()
        assert entry[0] == "python", hook
        files = files if hook.get("pass_filenames", True) else []
        return _run([str(tools / "python"), *entry[1:], *hook.get("args", []), *files], work)
    if hook["language"] == "system" and hook["entry"] == "bash":
        return _run(["bash", *hook["args"]], work)
    raise AssertionError(f"hook {hid} is neither run here nor listed in OFFLINE_UNAVAILABLE")


def _errors(output: str) -> Counter:
    """mypy's errors by (file, message): line numbers move when a patch adds lines above an old error."""
    found = re.findall(r"^(\S+?\.pyi?):\d+: error: (.*)$", output, re.MULTILINE)
    return Counter(found)


def run_mypy(hook: dict, files: list[str], work: Path, tools: Path, cache: Path, site_python: Path | None) -> str:
    """`tools/pre_commit/mypy.py` as the hook runs it (its `mypy` first on PATH); with site_python, mypy sees
    that interpreter's packages. The mypy cache is kept between runs: mypy checks each entry against the source."""
    shim = cache / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    extra = f"--python-executable {site_python} " if site_python else ""
    (shim / "mypy").write_text(f'#!/bin/sh\nexec "{tools / "mypy"}" {extra}--cache-dir "{cache / "mypy"}" "$@"\n')
    (shim / "mypy").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{tools}:{os.environ['PATH']}")
    entry = hook["entry"].split()
    done = _run([str(tools / "python"), entry[1], *[a.strip('"') for a in entry[2:]], *files], work, env)
    return done.stdout + done.stderr


def new_errors(base: str, patched: str) -> list[str]:
    """The patched tree's mypy errors that the unpatched tree does not have (as many times)."""
    extra = _errors(patched) - _errors(base)
    return [f"{path}: {message}" for (path, message), count in sorted(extra.items()) for _ in range(count)]
