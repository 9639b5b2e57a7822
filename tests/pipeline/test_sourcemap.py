"""Loading YAML with positions, and refusing what a blueprint must never contain."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.diagnostics import Position
from soul.errors import BlueprintNotFound, BlueprintTooLarge
from soul.language.blueprint import MAX_BYTES, read
from soul.language.sourcemap import MAX_NODES, load_yaml

Check = Callable[..., list[str]]


def test_every_value_and_key_keeps_its_line_and_column() -> None:
    loaded = load_yaml("a: 1\nsteps:\n  think:\n    after: [x, y]\n", "f.yaml")
    assert loaded.diagnostics == []
    assert loaded.data == {"a": 1, "steps": {"think": {"after": ["x", "y"]}}}
    src = loaded.source
    assert src.position(("steps", "think", "after", 1)) == Position(4, 16)
    assert src.position(("steps", "think"), key=True) == Position(3, 3)
    # a path that was never written points at its nearest written parent's key
    assert src.position(("steps", "think", "uses")) == Position(3, 3)


def test_duplicate_keys_are_refused_with_both_places() -> None:
    loaded = load_yaml("soul: a\nsoul: b\n", "f.yaml")
    assert [d.format() for d in loaded.diagnostics] == [
        "f.yaml:2:1: error: duplicate key 'soul' (first defined at line 1; keep one)"
    ]


def test_tabs_are_refused_where_they_are() -> None:
    loaded = load_yaml("soul: a\nsteps:\n\tthink: {}\n", "f.yaml")
    assert loaded.data is None
    assert loaded.diagnostics[0].format().startswith("f.yaml:3:1: error: tab character")


@pytest.mark.parametrize(
    "text",
    [
        "x: !!python/object/apply:os.system ['echo hi']\n",
        "x: !!python/name:os.system\n",
        "x: !custom 3\n",
        "x: !!binary aGVsbG8=\n",
        "x: !!set {a, b}\n",
    ],
)
def test_tags_that_construct_objects_are_refused(text: str) -> None:
    loaded = load_yaml(text, "f.yaml")
    (d,) = loaded.diagnostics
    assert d.line == 1 and d.col == 4
    assert "is not allowed: a blueprint is plain data" in d.message


def test_non_string_keys_are_refused_with_a_hint_about_yaml_booleans() -> None:
    loaded = load_yaml("on: 1\n", "f.yaml")
    assert loaded.diagnostics[0].format() == (
        "f.yaml:1:1: error: key 'on' is not a string (quote it: 'on' (YAML reads yes/no/on/off as booleans))"
    )


def test_a_syntax_error_points_at_the_problem() -> None:
    loaded = load_yaml("a: [1, 2\nb: 3\n", "f.yaml")
    (d,) = loaded.diagnostics
    assert (d.line, d.col) == (2, 2)
    assert d.message.startswith("invalid YAML:")


def test_more_than_one_document_is_refused() -> None:
    loaded = load_yaml("a: 1\n---\nb: 2\n", "f.yaml")
    assert loaded.diagnostics[0].format().startswith("f.yaml:2:1: error: more than one YAML document")


def test_an_empty_file_is_refused() -> None:
    assert load_yaml("", "f.yaml").diagnostics[0].message == "the blueprint is empty"


def test_an_alias_bomb_is_stopped() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    loaded = load_yaml("\n".join(lines) + "\n", "f.yaml")
    assert loaded.data is None
    assert f"more than {MAX_NODES} nodes" in loaded.diagnostics[0].message


def test_merge_keys_and_unquoted_dates_load_as_plain_data() -> None:
    loaded = load_yaml("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\nwhen: 2024-01-02\n", "f.yaml")
    assert loaded.diagnostics == []
    assert loaded.data["c"] == {"x": 1, "y": 2}
    assert loaded.data["when"] == "2024-01-02"


def test_blueprints_over_one_mebibyte_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("soul: x\n# " + "x" * MAX_BYTES + "\n")
    with pytest.raises(BlueprintTooLarge, match="at most 1,048,576 bytes"):
        read(big)


def test_a_missing_blueprint_names_the_built_in_souls() -> None:
    with pytest.raises(BlueprintNotFound, match=r"built-in souls: claudius, csd, entelgia, samantha.*did you mean 'claudius'"):
        read("claudus")


def test_non_utf8_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"soul: \xff\n")
    with pytest.raises(BlueprintNotFound, match="not UTF-8"):
        read(bad)


def test_errors_show_the_offending_line_with_a_caret(check: Check, write_blueprint: Callable[..., Path]) -> None:
    from soul.compiler.validation import validate

    checked = validate(write_blueprint("soul: t\nversion: 1\nsteps:\n  x: {uses: nope}\n"))
    text = checked.diagnostics[0].format_with_source()
    assert text.splitlines()[1:] == ["      x: {uses: nope}", "                ^"]


# Structures that crashed `soul validate` (issue 12.5): refused before anything recurses.
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "[" * 50_000, "nests more than 64 levels deep"),  # libyaml's composer segfaulted
        ("a: " + "[" * 1_000 + "]" * 1_000, "nests more than 64 levels deep"),  # was a RecursionError
        ("a: " + "{b: " * 200 + "1" + "}" * 200, "nests more than 64 levels deep"),
        ("a: &a [*a]", "alias *a refers to a collection that contains it"),
        ("a: &a {b: *a}", "alias *a refers to a collection that contains it"),
        ("version: " + "9" * 5_000, "a number of 5000 characters"),  # int() refuses > 4300 digits
        ("version: 1" + "0" * 400 + ".5", "a number of 403 characters"),
    ],
    ids=["50k-brackets", "1k-brackets", "200-maps", "self-alias", "self-alias-map", "5000-digits", "long-float"],
)
def test_hostile_structures_become_one_positioned_diagnostic(text: str, message: str) -> None:
    loaded = load_yaml(text, "f.yaml")
    assert [d.message for d in loaded.diagnostics if message in d.message] != [], loaded.diagnostics
    assert all(d.line >= 1 and d.col >= 1 for d in loaded.diagnostics)


def test_aliases_that_nest_a_shallow_file_deeply_are_refused() -> None:
    # each line is 30 deep, but the chain of aliases nests them into one another
    lines = ["x0: &x0 " + "[" * 30 + "1" + "]" * 30]
    lines += [f"x{i}: &x{i} " + "[" * 30 + f"*x{i - 1}" + "]" * 30 for i in range(1, 20)]
    loaded = load_yaml("\n".join(lines), "f.yaml")
    assert loaded.data is None
    assert "levels deep once aliases are expanded" in loaded.diagnostics[0].message


def test_an_alias_to_a_finished_node_still_loads() -> None:
    loaded = load_yaml("base: &b {x: 1}\nuse: [*b, *b]\n", "f.yaml")
    assert loaded.diagnostics == []
    assert loaded.data == {"base": {"x": 1}, "use": [{"x": 1}, {"x": 1}]}


def test_a_long_line_is_shown_around_the_error_not_whole() -> None:
    loaded = load_yaml("a: " + "x" * 3_000 + ": [", "f.yaml")
    shown = loaded.diagnostics[0].format_with_source().splitlines()
    assert len(shown[1]) < 120
    # the caret still sits under the column the message names
    line, caret = shown[1], shown[2]
    assert caret.index("^") < len(line) and line[caret.index("^")] in ":x"


_PIECES = st.sampled_from(["[", "]", "{", "}", "a: ", "- ", "&x ", "*x", ", ", "\n", "  ", "1", "'q'", "9" * 120, ": "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=400).map("".join), st.integers(min_value=0, max_value=3_000))
def test_any_nesting_gives_data_or_diagnostics_never_an_exception(text: str, depth: int) -> None:
    # random YAML-ish text, optionally under a deep prefix of brackets
    loaded = load_yaml("[" * depth + text, "f.yaml")  # must not raise
    assert all(d.line >= 1 and d.col >= 1 for d in loaded.diagnostics)
    if depth > 64:
        assert loaded.data is None and loaded.diagnostics
