"""Insert an item into a comma-separated LibCST sequence while keeping the sequence's own layout."""

from __future__ import annotations

from typing import Sequence, TypeVar

import libcst as cst

T = TypeVar("T", bound=cst.CSTNode)

_SPACE_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _separator(items: Sequence[cst.CSTNode]) -> cst.Comma:
    """The comma used between elements here (one-per-line layouts carry their newline and indent in it)."""
    for item in items[:-1]:
        if isinstance(item.comma, cst.Comma):
            return item.comma
    return _SPACE_COMMA


def insert_item(items: Sequence[T], new: T, index: int | None = None) -> list[T]:
    """Return `items` with `new` at `index` (default: the end), copying the neighbours' commas."""
    items = list(items)
    if not items:
        return [new.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    sep = _separator(items)
    if index is None or index >= len(items):
        last = items[-1]
        # A trailing comma stays trailing: it moves to the new last element.
        tail = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
        items[-1] = last.with_changes(comma=sep)
        items.append(new.with_changes(comma=tail))
    else:
        items.insert(index, new.with_changes(comma=sep))
    return items

