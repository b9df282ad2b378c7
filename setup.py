"""`pip wheel . --no-deps -w dist` builds the fork wheel through forktool, exactly like `python -m forktool build`.

The distribution it declares is vllm <pinned version>+<label>, so pip's check of the wheel it gets back holds.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from forktool.fetch import fetch  # noqa: E402
from forktool.project import Project  # noqa: E402

PROJECT = Project(ROOT)


class ForkWheel(bdist_wheel):
    """Replace setuptools' wheel with the patched upstream wheel that forktool writes."""

    def run(self):
        from forktool.internals import check_for_build
        from forktool.wheelbuild import build_wheel

        pin = PROJECT.pin
        wheel, digest = fetch(pin.name, pin.version, "wheel", pin.hashes)
        check_for_build(PROJECT, wheel, False, frozenset())  # a broken upstream internal stops it, as in build
        print(build_wheel(PROJECT, wheel, digest, Path(self.dist_dir), PROJECT.label))


setup(
    name=PROJECT.pin.name,
    version=f"{PROJECT.pin.version}+{PROJECT.label}",
    packages=[],
    cmdclass={"bdist_wheel": ForkWheel},
)
