"""Turn an old-schema spec (upstreamable edits marked `fork-only:`) into the new one: `new:` + a top-level `pr`.

    python -m forktool.migrate --pr eagle3-aux-capture edits/vllm/model_executor/models/x.py.toml [...]

Only the text changes (comments and layout stay); a spec that uses vllm._fork is refused (split it by hand).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from forktool.vocabulary import Exit

_FORK_ONLY = re.compile(r'^(upstream\s*=\s*")fork-only:\s*', re.MULTILINE)
_FIRST_TABLE = re.compile(r"^\[\[edit\]\]", re.MULTILINE)


def migrate_text(text: str, pr: str) -> str:
    """The spec with every `upstream = "fork-only: …"` as `new: …` and `pr = "<pr>"` before its first edit."""
    if "vllm._fork" in text:
        raise ValueError("uses vllm._fork: split its fork-only edits into <path>.fork.toml by hand")
    if re.search(r"^pr\s*=", text, re.MULTILINE):
        raise ValueError("already has a top-level pr")
    first = _FIRST_TABLE.search(text)
    if first is None:
        raise ValueError("no [[edit]] table")
    head, tail = text[: first.start()], text[first.start():]
    body = _FORK_ONLY.sub(r"\1new: ", tail)
    return f'{head.rstrip()}\npr = "{pr}"\n\n{body}'.lstrip("\n")


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(prog="forktool.migrate", description=__doc__.splitlines()[0])
    args.add_argument("--pr", required=True, help="id of the entry in upstream-prs/series.toml")
    args.add_argument("specs", nargs="+", type=Path)
    parsed = args.parse_args(argv)
    for spec in parsed.specs:
        try:
            spec.write_text(migrate_text(spec.read_text(encoding="utf-8"), parsed.pr), encoding="utf-8")
        except (OSError, ValueError) as exc:
            print(f"forktool.migrate: {spec}: {exc}", file=sys.stderr)
            return int(Exit.BAD_INPUT)
        print(spec)
    return int(Exit.OK)


if __name__ == "__main__":
    sys.exit(main())
