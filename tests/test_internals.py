"""Declared upstream internals: the table is complete, and a base that renames one shows it broken."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from fork_testing import run_forktool
from forktool.internals import INTERNALS_PATH, check_internals, load_internals
from forktool.project import REPO_ROOT
from forktool.sourcetree import SourceTree
from forktool.vocabulary import Exit, InternalStatus

# Fork code that runs against upstream: the overlay and the GLM KV benchmark the tests drive.
FORK_CODE = sorted([*REPO_ROOT.glob("vllm/_fork/**/*.py"), *REPO_ROOT.glob("benchmarks/glm5_kv/*.py")])
RENAMED = ("vllm.v1.core.kv_cache_planning", "_get_kv_cache_bytes_per_block")
FAKE_BASE = "0.33.0.post1"  # a made-up release: a copy of the pinned sources with one internal renamed


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _upstream_names(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted upstream path of every `from vllm… import x` / `import vllm… as y` (not vllm._fork)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "vllm":
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "vllm":
                    names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "vllm"
    return {local: path for local, path in names.items() if not path.startswith("vllm._fork")}


def _dotted(node: ast.AST, names: dict[str, str]) -> str | None:
    """`parallel_state._TP` -> `vllm.distributed.parallel_state._TP` when the chain starts at an upstream name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in names:
        return ".".join([names[node.id], *reversed(parts)])
    return None


def reached_internals(source: str) -> tuple[set[str], set[str]]:
    """(private upstream names the code reaches, `Class.method` calls of upstream classes to judge in the base)."""
    tree = ast.parse(source)
    names = _upstream_names(tree)
    private, calls = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in {p.rsplit(".", 1)[0] for p in names.values()}:
            private |= {f"{node.module}.{a.name}" for a in node.names if _private(a.name)}
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            found = _dotted(node, names)
            private |= {found} if found else set()
        elif isinstance(node, ast.ClassDef):  # a subclass of an upstream class setting a private member
            for base in filter(None, (_dotted(b, names) for b in node.bases)):
                private |= {f"{base}.{n}" for stmt in node.body for n in _targets(stmt) if _private(n)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = _dotted(node.func.value, names)
            if owner and owner.rsplit(".", 1)[-1][:1].isupper():
                calls.add(f"{owner}.{node.func.attr}")
    return private, calls


def _targets(stmt: ast.stmt) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _plain_method(sources: SourceTree, dotted: str) -> bool:
    """Whether module.Class.method is an instance method in the base (so a call on the class is unbound)."""
    path, cls, method = dotted.rsplit(".", 2)
    found = sources.definition(path, cls)
    if not found or not isinstance(found[1], ast.ClassDef):
        return False
    for node in found[1].body:
        if isinstance(node, ast.FunctionDef) and node.name == method:
            decorators = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
            return not decorators & {"classmethod", "staticmethod", "property"}
    return False


@pytest.fixture(scope="module")
def pinned_sources(upstream_wheel):
    with zipfile.ZipFile(upstream_wheel[0]) as wheel:
        files = {n: wheel.read(n).decode("utf-8") for n in wheel.namelist() if n.endswith(".py")}
    return files


def test_the_scanner_sees_each_way_of_reaching_in():
    source = ("from vllm.distributed import parallel_state\nfrom vllm.x.y import _hidden, Public\n"
              "import vllm.platforms as platforms\nfrom vllm.platforms.interface import Platform\n"
              "from vllm._fork.eagle3 import _ours\n"
              "class Mine(Platform):\n    _enum = 1\n"
              "def f(runner):\n    parallel_state._TP = 1\n    platforms._current_platform = 2\n"
              "    _ours()\n    return Public.method(runner)\n")
    private, calls = reached_internals(source)
    assert private == {"vllm.distributed.parallel_state._TP", "vllm.x.y._hidden", "vllm.platforms._current_platform",
                       "vllm.platforms.interface.Platform._enum"}
    assert calls == {"vllm.x.y.Public.method"}


def test_every_internal_the_fork_reaches_is_declared(pinned_sources):
    declared = {f"{i.module}.{i.name}" for i in load_internals(REPO_ROOT)}
    sources = SourceTree(pinned_sources.__getitem__, set(pinned_sources))
    undeclared = {}
    for path in FORK_CODE:
        private, calls = reached_internals(path.read_text(encoding="utf-8"))
        unbound = {c for c in calls if _plain_method(sources, c)}  # instance methods called on stand-ins
        for name in (private | unbound) - declared:
            undeclared[name] = path.relative_to(REPO_ROOT).as_posix()
    assert undeclared == {}, f"declare these in {INTERNALS_PATH}"
    # ... and nothing is declared that no fork file mentions any more.
    stale = [f"{i.label} in {path}" for i in load_internals(REPO_ROOT) for path in i.used_by
             if not (REPO_ROOT / path).is_file() or i.name.rsplit(".", 1)[-1] not in (REPO_ROOT / path).read_text()]
    assert stale == []


def test_every_declared_internal_is_present_in_the_pinned_base(pinned_sources):
    results = check_internals(load_internals(REPO_ROOT), SourceTree(pinned_sources.__getitem__, set(pinned_sources)))
    assert [r.line() for r in results if r.status != InternalStatus.PRESENT] == []


def _fake_release(pinned: dict[str, str], folder: Path) -> Path:
    """A small vllm==FAKE_BASE wheel: the internals' modules only (edits then find no file), one renamed."""
    internals = load_internals(REPO_ROOT)
    # Each internal's module as a file or a package, and the name itself where it is a submodule (vllm._custom_ops).
    modules = {i.module.replace(".", "/") for i in internals} | {f"{i.module}.{i.name}".replace(".", "/")
                                                                  for i in internals}
    wanted = {"vllm/platforms/__init__.py"} | {f"{m}.py" for m in modules} | {f"{m}/__init__.py" for m in modules}
    module, name = RENAMED
    renamed = f"{module.replace('.', '/')}.py"
    wheel = folder / f"vllm-{FAKE_BASE}-cp38-abi3-manylinux_2_28_x86_64.whl"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as out:
        for path in sorted(wanted & set(pinned)):
            text = pinned[path].replace(name, "_bytes_per_block") if path == renamed else pinned[path]
            out.writestr(path, text)
    return wheel


@pytest.fixture(scope="module")
def fake_cache(pinned_sources, tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("internals-cache")
    _fake_release(pinned_sources, cache / "wheel")
    return cache


def _env(cache: Path) -> dict:
    return dict(os.environ, FORKTOOL_CACHE=str(cache), FORKTOOL_OFFLINE="1")


def test_check_reports_a_renamed_internal_as_broken(fake_cache):
    done = run_forktool("check", "--base", f"vllm=={FAKE_BASE}", env=_env(fake_cache))
    assert done.returncode == Exit.FINDINGS, done.stdout + done.stderr
    broken = [line for line in done.stdout.splitlines() if line.startswith("broken   internal")]
    assert broken == [f"broken   internal {RENAMED[0]}:{RENAMED[1]} (used by vllm/_fork/kv_pages.py) — "
                      f"{RENAMED[0]} defines no {RENAMED[1]}"], done.stdout
    present = len(load_internals(REPO_ROOT)) - 1
    assert done.stdout.strip().endswith(f"overlay paths shadowed, {present} internals present, 1 broken")
    data = json.loads(run_forktool("check", "--base", f"vllm=={FAKE_BASE}", "--json", env=_env(fake_cache)).stdout)
    assert data["exit"] == Exit.FINDINGS and data["base"] == f"vllm-{FAKE_BASE}-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert [(i["name"], i["status"]) for i in data["internals"] if i["status"] != "present"] == [(RENAMED[1], "broken")]


def test_build_stops_at_a_renamed_internal_naming_it(fake_cache, repo_copy):
    wheel = next((fake_cache / "wheel").glob("*.whl"))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (repo_copy / "requirements" / "fake.txt").write_text(f"vllm=={FAKE_BASE} --hash=sha256:{digest}\n")
    out = repo_copy / "dist"
    done = run_forktool("build", "--pin", "requirements/fake.txt", "--out", str(out), repo=repo_copy,
                        env=_env(fake_cache))
    assert done.returncode == Exit.FINDINGS, done.stderr
    *edits, internal = done.stderr.splitlines()
    # The made-up base holds only the internals' modules: every edit names its missing file, then the internal.
    assert edits and all(line.startswith("forktool build: broken   edits/") and "upstream has no file" in line
                         for line in edits)
    assert internal == (f"forktool build: broken   internal {RENAMED[0]}:{RENAMED[1]} (used by "
                        f"vllm/_fork/kv_pages.py) — {RENAMED[0]} defines no {RENAMED[1]}")
    assert not out.exists()


def test_class_members_resolve_through_bases_and_self_assignments():
    files = {
        "vllm/a.py": "from vllm import b\nfrom vllm.b import Base as Renamed\nclass Child(Renamed):\n"
                     "    def __init__(self):\n        self.made = 1\n"
                     "class Dotted(b.Base): ...\nclass Typed(Renamed[int]): ...\n",
        "vllm/b.py": "class Base:\n    declared: int\n    def method(self): ...\n",
    }
    # Bases as the audit resolves them (the same SourceTree): by name, as module.Class, subscripted.
    table = [("Child.made", "present"), ("Child.declared", "present"), ("Child.method", "present"),
             ("Child.gone", "broken"), ("Missing", "broken"), ("Dotted.method", "present"),
             ("Typed.declared", "present"), ("Typed.made", "broken")]
    from forktool.internals import Internal

    internals = [Internal("vllm.a", name, ("x",), "test") for name, _ in table]
    results = check_internals(internals, SourceTree(files.__getitem__, set(files)))
    assert [(r.internal.name, r.status) for r in results] == table
