"""`pip wheel . --no-deps -w dist` builds the fork wheel through forktool, exactly like `python -m forktool build`.

The distribution it declares is vllm <pinned version>+<label>, so pip's check of the wheel it gets back holds.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from forktool.build import build  # noqa: E402
from forktool.options import BuildOptions  # noqa: E402
from forktool.project import Project  # noqa: E402

PROJECT = Project(ROOT)


class ForkWheel(bdist_wheel):
    """Replace setuptools' wheel with the patched upstream wheel that forktool writes."""

    def run(self):
        print(build(PROJECT, BuildOptions(out=Path(self.dist_dir))).path)


setup(
    name=PROJECT.pin.name,
    version=f"{PROJECT.pin.version}+{PROJECT.label}",
    packages=[],
    cmdclass={"bdist_wheel": ForkWheel},
)
