"""The contract table's typed rows: what forktool writes reads back with enum members, and a status this code does
not know is refused instead of passing as a string."""

from __future__ import annotations

import json

import pytest

from forktool.vocabulary import AuditStatus, ContractRow, OracleAnswer, OracleStatus


@pytest.mark.parametrize("status", list(AuditStatus))
def test_a_row_survives_the_json_the_build_writes(status):
    row = ContractRow("m.Outer", status, "why", ("m.Inner",), True,
                      {"eagle3": OracleAnswer(OracleStatus.PASS), "dflash": OracleAnswer(OracleStatus.FAIL, "x")},
                      OracleAnswer(OracleStatus.NOT_COMPARABLE, "no class"))
    back = ContractRow.from_json(json.loads(json.dumps(row.to_json())))
    assert back == row and type(back.status) is AuditStatus and back.proven


def test_a_static_row_is_not_proven_and_an_unknown_status_is_refused():
    assert not ContractRow.from_json({"cls": "m.Outer", "status": "works"}).proven
    with pytest.raises(ValueError, match="'working'"):
        ContractRow.from_json({"cls": "m.Outer", "status": "working"})
    with pytest.raises(ValueError, match="'passed'"):
        ContractRow.from_json({"cls": "m.Outer", "status": "works", "loaders": {"eagle3": ["passed", ""]}})
