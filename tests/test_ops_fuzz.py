"""Property tests: whatever the layout upstream uses, an edit yields valid Python with exactly one new item."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from fork_testing import PROVENANCE
from forktool.apply import apply_edits
from forktool.specs import _edit_from_table

names = st.lists(st.from_regex(r"[A-Z][A-Za-z0-9]{0,8}", fullmatch=True), min_size=0, max_size=6,
                 unique=True).filter(lambda xs: "SupportsEagle3" not in xs)
layouts = st.sampled_from(["inline", "one_per_line", "one_per_line_trailing", "hanging"])


def _render(items: list[str], layout: str) -> str:
    """Items as they might sit between brackets upstream."""
    if not items:
        return ""
    if layout == "inline":
        return ", ".join(items)
    if layout == "hanging":
        return "\n    " + ", ".join(items) + "\n"
    body = ",\n".join(f"    {item}" for item in items)
    return "\n" + body + (",\n" if layout == "one_per_line_trailing" else "\n")


def _edit(**fields):
    return _edit_from_table("fuzz.toml", "m.py", None, 0, {"id": "fuzz", **PROVENANCE, **fields})


@settings(max_examples=150, deadline=None)
@given(bases=names, layout=layouts, metaclass=st.booleans())
def test_add_base_any_layout(bases, layout, metaclass):
    inner = _render(bases, layout)
    if metaclass:
        inner = (inner.rstrip("\n").rstrip(",") + ", " if bases else "") + "metaclass=Meta"
    source = f"class Target({inner}):\n    x = 1  # kept\n" if inner else "class Target:\n    x = 1  # kept\n"
    edit = _edit(op="add_base", **{"class": "Target", "base": "SupportsEagle3"})
    changed, [result] = apply_edits({"m.py": source}, [edit])
    assert result.status == "clean"
    tree = ast.parse(changed["m.py"])
    cls = tree.body[0]
    assert [b.id for b in cls.bases] == bases + ["SupportsEagle3"]
    assert [k.arg for k in cls.keywords] == (["metaclass"] if metaclass else [])
    assert "x = 1  # kept" in changed["m.py"]
    again, [second] = apply_edits(changed, [edit])
    assert (second.status, again) == ("absorbed", {})


@settings(max_examples=150, deadline=None)
@given(keys=names, layout=layouts, brackets=st.sampled_from(["{}", "[]", "()", "dict"]))
def test_add_entry_any_layout(keys, layout, brackets):
    if brackets == "dict":
        items, opening, closing = [f'"{k}": {len(k)}' for k in keys], "{", "}"
        edit = _edit(op="add_entry", target="T", key='"SupportsEagle3"', value="14")
    else:
        items, (opening, closing) = [f'"{k}"' for k in keys], brackets
        edit = _edit(op="add_entry", target="T", value='"SupportsEagle3"')
    if brackets == "{}" and not items:
        return  # `{}` is an empty dict, not a set: nothing to edit as a set
    source = f"T = {opening}{_render(items, layout)}{closing}\n"
    if brackets == "()" and len(items) == 1 and layout in ("inline", "hanging", "one_per_line"):
        source = source.replace(f"{items[0]}", f"{items[0]},", 1)  # a one-element tuple needs its comma
    changed, [result] = apply_edits({"m.py": source}, [edit])
    assert result.status == "clean", (source, result.line())
    value = ast.literal_eval(changed["m.py"].split("=", 1)[1])
    if brackets == "dict":
        assert list(value) == keys + ["SupportsEagle3"]
    else:
        assert list(value) == keys + ["SupportsEagle3"] or (brackets == "{}" and set(value) == {*keys, "SupportsEagle3"})
    again, [second] = apply_edits(changed, [edit])
    assert (second.status, again) == ("absorbed", {})


texts = st.text(alphabet=st.sampled_from("ab \t_-\"'\\"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(first=texts, second=texts, wrap=st.sampled_from(["{}", "( {} )", "(\n    {}\n)", "{} "]))
def test_same_value_is_exact_inside_literals_and_blind_to_layout(first, second, wrap):
    """Two string literals are the same value exactly when their characters are; quotes and wrapping never count."""
    import libcst as cst

    from forktool.ops.base import same_value

    left = cst.parse_expression(wrap.format(repr(first)))
    right = cst.parse_expression(f'f({ascii(second)})').args[0].value  # another quoting of the same text
    assert same_value(left, right) == (first == second)
