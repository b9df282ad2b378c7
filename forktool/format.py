"""Format edited upstream files with upstream's pinned ruff and settings, so wheel, tree and patches agree."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from forktool import resultcache
from forktool.errors import ForkError
from forktool.fetch import fetch
from forktool.project import Project
from forktool.vocabulary import Exit

SETTINGS = "requirements/upstream-ruff.toml"
PIN_FILE = "requirements/engine.txt"


def pinned_ruff(root: Path) -> str:
    """The ruff version requirements/engine.txt pins (upstream's pre-commit rev)."""
    text = (root / PIN_FILE).read_text(encoding="utf-8")
    found = re.search(r"^ruff==(\S+)", text, re.MULTILINE)
    if not found:
        raise ForkError(f"{PIN_FILE}: no 'ruff==<version>' line; pin upstream's pre-commit ruff there")
    return found.group(1)


def _ruff_binary() -> str | None:
    """The ruff executable of the installed ruff package (found in-process: pip's isolated build env too)."""
    try:
        from ruff.__main__ import find_ruff_bin
        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        return None


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_ruff_binary() or "ruff", *args], capture_output=True, text=True)


def _require_ruff(root: Path) -> None:
    want = pinned_ruff(root)
    done = _ruff("--version") if _ruff_binary() else None
    have = done.stdout.split()[-1] if done and done.returncode == 0 and done.stdout.split() else None
    if have != want:
        raise ForkError(f"ruff {want} is needed to format edited files (found {have or 'none'}): "
                        f"pip install -r {PIN_FILE}")


def _skeleton(folder: Path, modules: list[str]) -> None:
    """Empty stand-ins for upstream's modules: isort calls an import first-party when its module exists there."""
    for path in modules:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).touch()


def _mark_packages(folder: Path, sources: dict[str, str]) -> None:
    """Every folder on a file's path is a package, as in the sdist."""
    for path in sources:
        for parent in Path(path).parents:
            init = folder / parent / "__init__.py"
            if parent != Path(".") and not init.exists():
                init.touch()


def format_sources(root: Path, versions: list[dict[str, str]], modules) -> list[dict[str, str]]:
    """Each {upstream path: text} formatted like upstream's pre-commit (isort fix, then format).

    `modules` are upstream's module paths (e.g. the wheel's names): ruff 0.14 sorts `from vllm.x import` as
    first-party only when vllm/x exists under a source root, so an empty skeleton of them is that root.
    A file formatted before with the same ruff, settings and modules comes from the result cache; the rest go
    through one `ruff check` and one `ruff format` run."""
    if not any(versions):
        return [dict(v) for v in versions]
    _require_ruff(root)
    settings = (root / SETTINGS).read_text(encoding="utf-8")
    upstream = sorted(m for m in modules if m.endswith(".py"))
    context = resultcache.key(resultcache.code_digest("format.py"), pinned_ruff(root), settings, upstream)
    keys = [{path: resultcache.key(context, path, text) for path, text in v.items()} for v in versions]
    cached = [{path: hit for path, entry in k.items() if isinstance(hit := resultcache.load("formatted", entry), str)}
              for k in keys]
    todo = [{path: text for path, text in v.items() if path not in hits} for v, hits in zip(versions, cached)]
    fresh = _ruff_batch(root, todo, upstream, settings) if any(todo) else [{} for _ in todo]
    for k, done in zip(keys, fresh):
        for path, text in done.items():
            resultcache.store("formatted", k[path], text)
    return [{path: hits.get(path, done.get(path)) for path in v} for v, hits, done in zip(versions, cached, fresh)]


def _ruff_batch(root: Path, versions: list[dict[str, str]], upstream: list[str], settings: str) -> list[dict]:
    """Every dict laid out in a folder of its own next to the skeleton; one check and one format over all."""
    with tempfile.TemporaryDirectory(prefix="forktool-format-") as tmp:
        skeleton = Path(tmp) / "upstream"
        _skeleton(skeleton, upstream)
        files: list[Path] = []
        for index, sources in enumerate(versions):
            folder = Path(tmp) / str(index)
            folder.mkdir()
            (folder / "ruff.toml").write_text(f"src = [\".\", {str(skeleton)!r}]\n{settings}", encoding="utf-8")
            for path, text in sources.items():
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                (folder / path).write_text(text, encoding="utf-8")
                files.append(folder / path)
            _mark_packages(folder, sources)
        names = [str(f) for f in files]
        for args in (("check", "--select", "I", "--fix-only", "--quiet", "--no-cache"),
                     ("format", "--quiet", "--no-cache")):
            done = _ruff(*args, *names)
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["no output"])[0]
                raise ForkError(f"ruff {args[0]} refused an edited file: {first}")
        return [{path: (Path(tmp) / str(i) / path).read_text(encoding="utf-8") for path in sources}
                for i, sources in enumerate(versions)]


def main(argv: list[str] | None = None) -> int:
    """`python -m forktool.format FILE…`: format PR test files (upstream-prs/tests/…) in place like the build."""
    project = Project()
    paths = [Path(p).resolve() for p in (sys.argv[1:] if argv is None else argv)]
    try:
        wheel, _ = fetch(project.pin.name, project.pin.version, "wheel", project.pin.hashes)
        with zipfile.ZipFile(wheel) as zin:
            modules = zin.namelist()
        tests = project.root / "upstream-prs"
        sources = {p.relative_to(tests).as_posix(): p.read_text(encoding="utf-8") for p in paths}
        [done] = format_sources(project.root, [sources], modules)
    except (ForkError, ValueError, OSError) as exc:
        print(f"forktool.format: {exc}", file=sys.stderr)
        return int(Exit.BAD_INPUT)
    for path in paths:
        text = done[path.relative_to(tests).as_posix()]
        if text != path.read_text(encoding="utf-8"):
            path.write_text(text, encoding="utf-8")
            print(f"reformatted {path.relative_to(project.root)}")
    return int(Exit.OK)


if __name__ == "__main__":
    sys.exit(main())
