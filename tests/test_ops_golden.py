"""Golden before/after fixtures for every edit operation, including zero, two and already-present matches."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fork_testing import PROVENANCE
from forktool.apply import apply_edits
from forktool.errors import ForkError
from forktool.ops import OPERATIONS
from forktool.specs import _edit_from_table

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
CASES = sorted(p for p in FIXTURES.glob("*/*") if p.is_dir())


def _apply(case: Path, text: str):
    """Apply the case's edit (with fixture provenance) to `text`: (changed files, the one result)."""
    table = {"id": case.name, **PROVENANCE, **tomllib.loads((case / "edit.toml").read_text())}
    edit = _edit_from_table(f"fixtures/{case.name}.toml", "target.py", None, 0, table)
    changed, [result] = apply_edits({"target.py": text}, [edit])
    return changed, result


@pytest.mark.parametrize("op", sorted(OPERATIONS))
def test_each_operation_has_applied_absorbed_zero_two_match_and_whitespace_cases(op):
    cases = [c for c in CASES if c.parent.name == op]
    expects = [(c / "expect.txt").read_text() for c in cases if (c / "expect.txt").exists()]
    assert any((c / "after.py").exists() for c in cases)
    assert any(e.startswith("absorbed") for e in expects)
    assert any("matched 0 place" in e for e in expects)
    assert any("matched 2 place" in e or "2 from-imports" in e for e in expects)
    # Written differently only inside a literal (or a dotted name): one AST equivalence decides for every op.
    assert any("whitespace" in c.name for c in cases)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden(case: Path):
    before = (case / "before.py").read_text()
    if (case / "after.py").exists():
        changed, result = _apply(case, before)
        assert result.status == "clean", result.line()
        assert changed["target.py"] == (case / "after.py").read_text()
        compile(changed["target.py"], str(case), "exec")
        # The edit on its own output is recognised as already there: never applied twice.
        again, second = _apply(case, changed["target.py"])
        assert (second.status, again) == ("absorbed", {})
        return
    status, _, detail = (case / "expect.txt").read_text().strip().partition(": ")
    if status == "error":  # bad input: one line naming the edit and the field, nothing applied
        with pytest.raises(ForkError) as error:
            _apply(case, before)
        message = str(error.value)
        assert message.startswith(f"fixtures/{case.name}.toml: edit '{case.name}'") and message.endswith(detail)
        return
    changed, result = _apply(case, before)
    assert result.status == status, result.line()
    assert detail in result.detail
    assert changed == {}, "a refused edit must leave the file untouched"
