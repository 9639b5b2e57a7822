"""Valid means runnable, for templates (issue 12): `soul validate` compiles the template
parameters a kind declares (`"format": "template"`) and reports, at FILE:LINE:COL, what fails
whatever the data — unknown filters and tests (also inside `{% if %}`), constant expressions
the sandbox refuses or Python cannot compute — in template files, includes, inline templates
and gates, without rendering and at a bounded cost. What depends on the data stays a run-time
StepError."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

import soul
from soul.errors import StepError
from soul.kinds import Registry, StepKind, default_registry
from soul.kinds.stepkind import Output
from soul.language import analyse_template, environment

Check = Callable[..., list[str]]
HEAD = "soul: t\nversion: 1\n"
WITH_TEMPLATE = HEAD + "steps:\n  reply: {uses: external_dialogue, template: reply.j2}\n"
AT_TEMPLATE = "soul.yaml:4:46: error: "  # where `template: reply.j2` is written
LIMITS = "templates and gates run in a bounded sandbox: see Limits in docs/blueprints.md"


# -- inline templates: the parameters a kind declares are compiled ------------------------


def test_a_syntax_error_in_a_block_template_is_reported_at_its_own_line(check: Check) -> None:
    text = HEAD + (
        "memory: {field: f}\n"
        "steps:\n"
        "  reply: {uses: external_dialogue}\n"
        "  note:\n"
        "    uses: memory.store\n"
        "    after: [reply]\n"
        "    with:\n"
        "      content: |\n"
        "        The user said {{ input.text }}\n"
        "        {% if turn.first %}first{% endfi %}\n"
    )
    (line,) = check(text)
    assert line.startswith("soul.yaml:12:36: error: `content` does not compile: Encountered unknown tag 'endfi'")  # at endfi


def test_a_syntax_error_in_a_flow_string_is_reported_at_the_string(check: Check) -> None:
    text = HEAD + "memory: {field: f}\nsteps:\n  recall: {uses: memory.recall, with: {query: '{{ input.text }'}}\n  reply: {uses: external_dialogue, after: [recall]}\n"
    (line,) = check(text)
    assert line == "soul.yaml:5:62: error: `query` does not compile: unexpected '}'"  # the string opens at 47


def test_a_quoted_multiline_template_names_the_line_it_cannot_point_at(check: Check) -> None:
    text = HEAD + 'memory: {field: f}\nsteps:\n  recall: {uses: memory.recall, with: {query: "a\\nb {{ x"}}\n  reply: {uses: external_dialogue, after: [recall]}\n'
    (line,) = check(text)
    assert line.startswith("soul.yaml:5:47: error: `query` line 2 does not compile: unexpected end of template")


class Noted(StepKind):
    """A plugin kind: `text` is declared a template, `label` is a plain string."""

    name = "test.noted"
    description = "Writes a note."
    llm = False
    outputs = (Output("note", "text", "the note"),)
    params: ClassVar[dict[str, Any]] = {
        "type": "object", "additionalProperties": False,
        "properties": {"text": {"type": "string", "format": "template"}, "label": {"type": "string"}},
    }
    effects = ("state",)  # not dead: nothing need read it


def _registry() -> Registry:
    registry = Registry()
    for kind in default_registry():
        registry.register(kind)
    registry.register(Noted)
    return registry


def test_a_plugin_kind_declares_its_template_parameters(write_blueprint: Callable[..., Path]) -> None:
    text = HEAD + "steps:\n  reply: {uses: external_dialogue}\n  n: {uses: test.noted, after: [reply], with: {text: '{{ oops', label: '{{ not a template'}}\n"
    diagnostics = [d.format() for d in soul.validate(write_blueprint(text), _registry()).diagnostics]
    # the string opens at 54; the caret after `oops`, where the template ended too soon
    assert diagnostics == ["soul.yaml:5:62: error: `text` does not compile: unexpected end of template, expected 'end of print statement'."]


def test_an_inline_template_that_always_fails_is_reported(check: Check) -> None:
    text = HEAD + "memory: {field: f}\nsteps:\n  reply: {uses: external_dialogue}\n  note: {uses: memory.store, after: [reply], with: {content: '{{ \"ab\" * 10**7 }}'}}\n"
    (line,) = check(text)
    assert line == ("soul.yaml:6:71: error: `content` always refused by the sandbox: '*' would make 20,000,000 "
                    f"characters or items; templates may make at most 1,048,576 ({LIMITS})")


# -- template files, includes and gates: what fails whatever the data ---------------------


def test_an_unknown_filter_inside_an_if_is_reported_with_a_suggestion(check: Check) -> None:
    out = check(WITH_TEMPLATE, **{"reply.j2": "Hi\n{% if input.text|lenght > 3 %}long{% endif %}\n{% if turn is evn %}x{% endif %}"})
    assert out == [
        "reply.j2:2:18: error: no filter named 'lenght' (did you mean 'length'?)",
        "reply.j2:3:15: error: no test named 'evn' (did you mean 'even'?)",
    ]


# the caret goes under the part that fails: the operator (not a `%` inside a string), the
# filter's name, the call to range
@pytest.mark.parametrize(("expression", "at", "message"), [
    ('"x" * 10**9', "*", "always refused by the sandbox: '*' would make 1,000,000,000"),
    ('"x"|center(10**9)', "center", "always refused by the sandbox: filter 'center' would make 1,000,000,000"),
    ('"%999999999d" % 1', "% 1", "always refused by the sandbox: % formatting would make 999,999,999"),
    ("2 ** (10**9)", "** (", "always refused by the sandbox: '**' would make a number of over 65,536 bits"),
    ('("ab"|upper) ~ ("x" * 10**7)', "* 10", "always refused by the sandbox: '*' would make 10,000,000"),
    ("range(10**6)|list", "range", "always refused by the sandbox: Range too big"),
    ("1 / 0", "/", "fails whenever it runs: division by zero"),
    ('"a" + 1', "+", 'fails whenever it runs: can only concatenate str (not "int") to str'),
])
def test_a_constant_expression_that_always_fails_is_reported_at_its_line_and_column(
        check: Check, expression: str, at: str, message: str) -> None:
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": f"Hello\n{{{{ {expression} }}}}"})
    col = len("{{ ") + expression.index(at) + 1
    assert line.startswith(f"reply.j2:2:{col}: error: {message}")


def test_an_include_that_always_fails_is_reported_at_the_step(check: Check) -> None:
    (line,) = check(WITH_TEMPLATE, **{"reply.j2": "{% include 'part.j2' %}", "part.j2": "a\n{% for i in range(10**7) %}{% endfor %}"})
    assert line.startswith(AT_TEMPLATE + "'part.j2' line 2: always refused by the sandbox: Range too big")


def test_a_gate_that_always_fails_is_reported_at_the_gate(check: Check) -> None:
    out = check(HEAD + "steps:\n  reply: {uses: external_dialogue, when: 'input.text|lenght > 3 and \"x\" * 10**9'}\n")
    assert out == [
        "soul.yaml:4:42: error: always refused by the sandbox: '*' would make 1,000,000,000 characters or items; "
        f"templates may make at most 1,048,576 ({LIMITS})",
        "soul.yaml:4:42: error: no filter named 'lenght' (did you mean 'length'?)",
    ]


@pytest.mark.parametrize("source", [
    "{{ input.text * 3 }}",
    "{% for i in range(state|length) %}{{ i }}{% endfor %}",
    '{% set range = [1, 2] %}{{ range|length }}',
    '{{ "x" * 1000 }}{{ 10 ** 100 }}{{ "%5d" % 3 }}{{ "ab"|center(40) }}',
    "{% if false %}{{ input.text|upper }}{% endif %}",
])
def test_what_depends_on_the_data_or_stays_in_bounds_is_not_reported(check: Check, source: str) -> None:
    assert check(WITH_TEMPLATE, **{"reply.j2": source}) == []


def test_what_depends_on_the_data_still_fails_at_run_time() -> None:
    source = "{{ input.text * n }}"
    assert analyse_template(source).refused == ()
    with pytest.raises(StepError, match="'\\*' would make"):
        environment().from_string(source).render(input={"text": "ab"}, n=10**7)


def test_folding_is_bounded_whatever_the_template_asks(check: Check) -> None:
    # each item is within the limits, but folding all 300 would hold 300 MB at once: folding
    # stops at its budget (and 2,000 more such expressions cost no more)
    template = "{{ [" + '"x" * 1000000, ' * 300 + "] }}\n" + '{{ "x" * 1000000 }}\n' * 2_000
    tracemalloc.start()
    started = time.perf_counter()
    out = check(WITH_TEMPLATE, **{"reply.j2": template})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out == []
    assert time.perf_counter() - started < 10 and peak < 64 * 1024 * 1024


def test_the_built_in_souls_have_nothing_that_always_fails() -> None:
    for name in ("claudius", "samantha", "csd"):
        checked = soul.validate(name)
        assert checked.ok, [d.format() for d in checked.diagnostics]
