"""`check --base REQ`: try every edit, the overlay and the declared internals on another release; report."""

from __future__ import annotations

import json
import zipfile

from forktool.assembly import assemble
from forktool.fetch import fetch
from forktool.internals import check_internals, load_internals
from forktool.overlay import shadowed
from forktool.pins import exact_requirement
from forktool.project import Project
from forktool.sourcetree import SourceTree
from forktool.vocabulary import EditStatus, Exit, InternalStatus


def check_base(project: Project, requirement: str, as_json: bool = False) -> int:
    """Print one line per edit, per shadowed overlay path and per internal (or one JSON object); 1 if any is bad."""
    name, version = exact_requirement(requirement, "--base")
    pin = project.pin
    hashes = pin.hashes if (name, version) == (pin.name, pin.version) else None
    internals = load_internals(project.root)  # a malformed table is bad input before any download
    wheel, digest = fetch(name, version, "wheel", hashes)
    with zipfile.ZipFile(wheel) as zin:
        base = SourceTree.from_zip(zin)
        fork = assemble(project, base, formatted=False)
        resolved = check_internals(internals, base)
    clashes = shadowed(fork.overlay, base.paths)
    counts = {str(s): sum(r.status == s for r in fork.results) for s in EditStatus}
    broken_internals = sum(r.status == InternalStatus.BROKEN for r in resolved)
    bad = counts[EditStatus.BROKEN] or clashes or broken_internals
    code = Exit.FINDINGS if bad else Exit.OK
    if as_json:
        print(json.dumps({
            "base": wheel.name, "sha256": digest, "exit": int(code), "counts": counts,
            "edits": [{"spec": r.edit.spec_file, "id": r.edit.id, "op": r.edit.op, "status": str(r.status),
                       "detail": r.detail} for r in fork.results],
            "shadowed": clashes, "internals": [r.as_dict() for r in resolved],
        }, indent=1, sort_keys=True))
        return code
    print(f"base {wheel.name} sha256 {digest}")
    for result in fork.results:
        print(result.line())
    for path in clashes:
        print(f"shadowed {path} — exists upstream in {wheel.name}; rename it or turn it into an edit")
    for result in resolved:
        print(result.line())
    print(f"{counts[EditStatus.CLEAN]} clean, {counts[EditStatus.ABSORBED]} absorbed, {counts[EditStatus.BROKEN]} "
          f"broken, {len(clashes)} overlay paths shadowed, {len(resolved) - broken_internals} internals present, "
          f"{broken_internals} broken")
    return code
