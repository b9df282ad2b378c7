"""The typed vocabulary of edits: each operation's fields, its LibCST implementation and its anchor text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from forktool.ops import bases, capture, imports, literals, methods, statements
from forktool.ops.base import Outcome


@dataclass(frozen=True)
class Operation:
    """One operation: fields it takes (name -> required?), how it applies, how it names its anchor."""

    fields: dict[str, bool]
    apply: Callable[[cst.Module, dict], Outcome]
    describe: Callable[[dict], str]


OPERATIONS: dict[str, Operation] = {
    "add_base": Operation(bases.FIELDS, bases.apply, bases.describe),
    "ensure_import": Operation(imports.FIELDS, imports.apply, imports.describe),
    "add_entry": Operation(literals.ENTRY_FIELDS, literals.apply_entry, literals.describe_entry),
    "add_literal_member": Operation(literals.MEMBER_FIELDS, literals.apply_member, literals.describe_member),
    "replace_expression": Operation(statements.REPLACE_FIELDS, statements.apply_replace, statements.describe_replace),
    "insert_statement": Operation(statements.INSERT_FIELDS, statements.apply_insert, statements.describe_insert),
    "add_sibling": Operation(statements.SIBLING_FIELDS, statements.apply_sibling, statements.describe_sibling),
    "capture_aux_hidden_states": Operation(capture.FIELDS, capture.apply, capture.describe),
    "add_method": Operation(methods.FIELDS, methods.apply, methods.describe),
}
