"""The fork over one upstream tree: every edit applied (and formatted like upstream), the overlay beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forktool import overlay as overlay_mod
from forktool.apply import EditResult, apply_edits
from forktool.errors import FindingsError, ForkError
from forktool.format import format_sources
from forktool.options import BuildOptions
from forktool.project import Project
from forktool.sourcetree import SourceTree
from forktool.vocabulary import EditStatus


@dataclass(frozen=True)
class Assembly:
    """The fork's changes over one upstream tree: edited files, per-edit results and overlay files."""

    upstream: SourceTree
    changed: dict[str, str]
    results: list[EditResult]
    overlay: dict[str, bytes]

    def tree(self) -> SourceTree:
        """The upstream tree with the edited files and the Python overlay laid over it (what the audit reads).

        A new tree each time, not kept: a classified tree holds the parsed modules of every model, which would slow
        down every later garbage collection of the build."""
        added = {path: data.decode("utf-8") for path, data in self.overlay.items() if path.endswith(".py")}
        return self.upstream.laid_over({**added, **self.changed})

    def require_buildable(self, upstream_name: str, more_findings: Sequence[str] = ()) -> None:
        """Stop at broken edits (and `more_findings`, one line each: one run names every culprit), then at an
        overlay file that would replace an upstream one."""
        broken = [r.line() for r in self.results if r.status == EditStatus.BROKEN] + list(more_findings)
        if broken:
            raise FindingsError("\n".join(broken))
        overlay_mod.require_new(self.overlay, self.upstream.paths, upstream_name)


def assemble(project: Project, upstream: SourceTree, options: BuildOptions = BuildOptions(), *,
             formatted: bool = True) -> Assembly:
    """Apply every edit to the files of `upstream`; nothing is checked (Assembly.require_buildable does).

    On an older, test-only base, options.allow_absent records an edit whose file the base does not have yet as
    `absent` instead of broken, and options.skip names edits (`<spec file>:<id>`) not to try there (`skipped`).
    Edited files are formatted with upstream's ruff (forktool/format.py) unless `formatted` is off (`check`
    only reads statuses)."""
    edits = project.edits()
    unknown = sorted(options.skip - {f"{e.spec_file}:{e.id}" for e in edits})
    if unknown:
        raise ForkError(f"--skip {unknown[0]}: no such edit; name it as <spec file>:<edit id>")
    tried = [e for e in edits if f"{e.spec_file}:{e.id}" not in options.skip]
    sources = {e.target: upstream.read(e.target) for e in tried if e.target in upstream.paths}
    missing = EditStatus.ABSENT if options.allow_absent else EditStatus.BROKEN
    changed, results = apply_edits(sources, tried, missing)
    if formatted:
        [changed] = format_sources(project.root, [changed], upstream.paths)
    by_edit = {id(r.edit): r for r in results}
    ordered = [by_edit.get(id(e)) or EditResult(e, EditStatus.SKIPPED, "not tried on this base (--skip)")
               for e in edits]
    return Assembly(upstream, changed, ordered, project.overlay())
