"""`check --base REQ`: try every edit and the overlay on another release and report what would happen."""

from __future__ import annotations

import zipfile

from forktool.fetch import fetch
from forktool.overlay import shadowed
from forktool.pins import exact_requirement
from forktool.project import Project, assemble


def check_base(project: Project, requirement: str) -> int:
    """Print one line per edit (clean / absorbed / broken) and per shadowed overlay path; 1 if any is bad."""
    name, version = exact_requirement(requirement, "--base")
    pin = project.pin
    hashes = pin.hashes if (name, version) == (pin.name, pin.version) else None
    wheel, digest = fetch(name, version, "wheel", hashes)
    print(f"base {wheel.name} sha256 {digest}")
    with zipfile.ZipFile(wheel) as zin:
        names = set(zin.namelist())
        fork = assemble(project, lambda p: zin.read(p).decode("utf-8"), names)
    for result in fork.results:
        print(result.line())
    clashes = shadowed(fork.overlay, names)
    for path in clashes:
        print(f"shadowed {path} — exists upstream in {wheel.name}; rename it or turn it into an edit")
    counts = {s: sum(r.status == s for r in fork.results) for s in ("clean", "absorbed", "broken")}
    print(f"{counts['clean']} clean, {counts['absorbed']} absorbed, {counts['broken']} broken, "
          f"{len(clashes)} overlay paths shadowed")
    return 1 if counts["broken"] or clashes else 0
