"""A mistake in a template is reported at its line and column in the template file, the caret
under it — whatever the kind of mistake (a name, a read, a filter, a syntax error), and when a
render fails at run time, the message names the template's line."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from soul.cli.main import main
from soul.errors import StepError
from soul.language import column, name_pattern
from soul.language.columns import filter_pattern, literal_pattern

HEAD = "soul: t\nversion: 1\n"
WITH_THINK = HEAD + "steps:\n  think: {uses: internal_monologue, template: think.j2}\n  reply: {uses: external_dialogue, after: [think]}\n"


def shown(capsys: pytest.CaptureFixture[str], write_blueprint: Callable[..., Path], template: str) -> list[str]:
    path = write_blueprint(WITH_THINK, **{"think.j2": template})
    assert main(["validate", str(path)]) == 1
    return capsys.readouterr().err.splitlines()[:3]


def test_an_unknown_name_on_line_2_is_reported_there_with_the_caret_under_it(
        capsys: pytest.CaptureFixture[str], write_blueprint: Callable[..., Path]) -> None:
    # the case: reported at think.j2:1:1, quoting line 1
    assert shown(capsys, write_blueprint, "Think about {{ input.text }}.\nThen {{ stepz.think }} again\n") == [
        "think.j2:2:9: error: unknown name 'stepz' (did you mean 'steps'?)",
        "    Then {{ stepz.think }} again",
        "            ^",
    ]


def test_a_syntax_error_points_at_the_token_the_parser_stopped_at(
        capsys: pytest.CaptureFixture[str], write_blueprint: Callable[..., Path]) -> None:
    assert shown(capsys, write_blueprint, "One.\nTwo {{ input.text ) }}\n") == [
        "think.j2:2:19: error: template does not compile: unexpected ')'",
        "    Two {{ input.text ) }}",
        "                      ^",
    ]


def test_a_character_the_lexer_refuses_is_pointed_at_exactly(
        capsys: pytest.CaptureFixture[str], write_blueprint: Callable[..., Path]) -> None:
    assert shown(capsys, write_blueprint, "One.\n  {{ input.text $ 1 }}\n")[1:] == [
        "      {{ input.text $ 1 }}",
        "                    ^",
    ]


def test_a_state_read_of_a_missing_key_points_at_the_read_not_the_text(
        capsys: pytest.CaptureFixture[str], write_blueprint: Callable[..., Path]) -> None:
    # "state" in the text before the tag is not the read
    assert shown(capsys, write_blueprint, "Your state is {{ state.mood }}\n")[0] == (
        "think.j2:1:18: error: state has no key 'mood' (declared keys: (none))")


def test_a_render_failure_names_the_template_line(write_blueprint: Callable[..., Path]) -> None:
    path = write_blueprint(WITH_THINK.replace("version: 1\n", "version: 1\nstate:\n  mood: {default: calm}\n"),
                           **{"think.j2": "One.\nTwo {{ state.mood.missing.deeper }}\n"})
    with pytest.raises(StepError, match=r"^step 'think': template 'think\.j2' line 2: 'str object' has no attribute 'missing'$"):
        main(["--debug", "explain", str(path), "-m", "hi"])


def test_a_render_failure_in_an_included_template_names_that_template(write_blueprint: Callable[..., Path]) -> None:
    path = write_blueprint(WITH_THINK.replace("version: 1\n", "version: 1\nstate:\n  mood: {default: calm}\n"),
                           **{"think.j2": "One.\n{% include 'part.j2' %}\n", "part.j2": "a\nb\n{{ state.mood.x.y }}\n"})
    with pytest.raises(StepError, match=r"^step 'think': template 'think\.j2', in 'part\.j2' line 3: "):
        main(["--debug", "explain", str(path), "-m", "hi"])


@pytest.mark.parametrize(("line", "near", "col"), [
    ("text name {{ name }}", name_pattern("name"), 14),  # the word in the text is not the read
    ("{{ a.name }} {{ name }}", name_pattern("name"), 17),  # an attribute is not the name
    ("{{ x | lenght }}", filter_pattern("lenght"), 8),
    ('{{ "%d" % 1 }}', literal_pattern("%"), 9),  # not the % inside the string
    ("plain text", name_pattern("x"), 1),  # nothing found, no tag: the line's start
    ("ab {% if x %}", name_pattern("nope"), 4),  # nothing found: the first tag
])
def test_column_finds_the_mistake_inside_the_tags(line: str, near: str, col: int) -> None:
    assert column(line, near) == col


def test_column_is_linear_on_a_hostile_line() -> None:
    line = "{{ " + "'" * 50_000 + '"' * 50_000 + "{{ a " * 20_000
    started = time.perf_counter()
    column(line, name_pattern("zzz"))
    column(line, literal_pattern("%"))
    assert time.perf_counter() - started < 5  # quadratic would take minutes
