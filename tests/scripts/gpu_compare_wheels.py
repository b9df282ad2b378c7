"""Compare the Python files of two vLLM wheels (the repacked fork wheel and one built from `forktool tree` with CMake).

Usage: python gpu_compare_wheels.py REPACKED.whl CMAKE.whl
Exit 0: the same .py files with the same bytes; 1: differences (listed, first 20); 2: a wheel cannot be read.
Compiled files (.so) differ by construction and are not compared.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from forktool.vocabulary import Exit  # noqa: E402  (the repository's copy: no vllm needed on the build agent)


def python_files(wheel: Path) -> dict[str, str]:
    """path -> sha256 of every .py file in the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        return {name: hashlib.sha256(archive.read(name)).hexdigest() for name in archive.namelist()
                if name.endswith(".py")}


def differences(first: dict[str, str], second: dict[str, str]) -> list[str]:
    only_first = [f"only in the first wheel: {p}" for p in sorted(set(first) - set(second))]
    only_second = [f"only in the second wheel: {p}" for p in sorted(set(second) - set(first))]
    changed = [f"differs: {p}" for p in sorted(set(first) & set(second)) if first[p] != second[p]]
    return only_first + only_second + changed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: gpu_compare_wheels.py REPACKED.whl CMAKE.whl", file=sys.stderr)
        return Exit.BAD_INPUT
    try:
        first, second = (python_files(Path(p)) for p in argv)
    except (OSError, zipfile.BadZipFile) as exc:
        print(f"gpu_compare_wheels: cannot read a wheel: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    found = differences(first, second)
    for line in found[:20]:
        print(line)
    print(f"{len(first)} Python files compared: " + (f"{len(found)} differences" if found else "identical"))
    return Exit.FINDINGS if found else Exit.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
