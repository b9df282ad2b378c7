"""Provenance of this build of the vLLM fork: upstream release, edits applied and overlay files."""

from __future__ import annotations

import json


def manifest() -> dict:
    """The manifest written by forktool when this fork was built."""
    from vllm._fork._manifest import MANIFEST_JSON  # generated at build time

    return json.loads(MANIFEST_JSON)


def summary(data: dict) -> str:
    """Human-readable provenance, one fact per line."""
    upstream = data["upstream"]
    lines = [
        f"vllm {data['fork_version']} (fork of {upstream['name']} {upstream['version']}, "
        f"{upstream['artifact']} sha256 {upstream['sha256']})",
    ]
    lines += [f"  edit {e['status']:8} {e['target']} :: {e['id']} ({e['op']})" for e in data["edits"]]
    lines += [f"  overlay  {o['path']}" for o in data["overlay"]]
    return "\n".join(lines)
