"""How one build runs, in one place: the options and the flags that set them (the CLI's and a pin file's)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkError


@dataclass(frozen=True)
class BuildOptions:
    """Where the artifact goes, its version label and, for an older test-only base, what that base may lack."""

    out: Path = Path("dist")
    label: str | None = None  # None: the project's label (pyproject.toml)
    allow_absent: bool = False  # an edit whose file the base does not have yet is `absent`, not broken
    skip: frozenset[str] = frozenset()  # `<spec file>:<edit id>` not tried on this base (`skipped`)
    recompress: bool = False  # inflate and deflate unchanged wheel members again (the benchmark's baseline)

    @classmethod
    def from_flags(cls, flags: tuple[str, ...], where: str, **fields) -> BuildOptions:
        """Options from base flags as the CLI takes them (a pin file's `# forktool build flags:` line)."""
        parser = argparse.ArgumentParser(add_help=False)
        add_base_flags(parser)
        args, unknown = parser.parse_known_args(list(flags))
        if unknown:
            raise ForkError(f"{where}: unknown build flag(s) {unknown}; a base takes --allow-absent and --skip")
        return cls(allow_absent=args.allow_absent, skip=frozenset(args.skip), **fields)


def add_base_flags(parser: argparse.ArgumentParser) -> None:
    """The build flags a test-only base needs (its pin file lists them; see requirements/cpu-base.txt)."""
    parser.add_argument("--allow-absent", action="store_true",
                        help="record edits whose file this base does not have yet as absent, and print "
                             "declared internals it lacks, instead of failing (a test-only base)")
    parser.add_argument("--skip", action="append", default=[], metavar="SPEC:ID",
                        help="do not try this edit on this base (repeatable); it is listed as skipped")
