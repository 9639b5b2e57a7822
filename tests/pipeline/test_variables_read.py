"""Variables are built only as they are read (issue 26): a `when` gate is given the names its
expression reads (found once per expression), a step without a model call reads them as it
goes (`Variables`); each decides and reads exactly as with every variable built."""

from __future__ import annotations

from pathlib import Path

import pytest

import soul
from soul.errors import StepError
from soul.kinds import CONTEXT_NAMES
from soul.records import MemoryEntry
from soul.runtime.turn.context import TurnContext
from soul.runtime.turn.gates import GateEvaluator
from soul.runtime.turn.prompting.prompt import EVERY_NAME, NAMES, PromptBuilder, Variables

EXPRESSIONS = [
    "steps.check.result",
    "not steps.check.result and turn.number > 1",
    "state.mood == 'calm'",
    "'tokenizer' in input.text",
    "chetana.affect.frustration < 0.7",
    "memory.notes | length > 1",
    "user_model.startswith('# Ada')",
    "soul.name == 'probe' and params | length == 0",
    "steps.check.result is defined and mind | length == 0",
    "range(3) | list | length == 3",  # a global, no variable
    "true",
]


def _builder_and_context(soul_home: Path) -> tuple[PromptBuilder, TurnContext]:
    s = soul.load("claudius", home=soul_home)
    builder = s.services.builder
    ctx = TurnContext(
        "refactor the tokenizer", user="ada", number=3, state={"mood": "calm"}, user_model="# Ada\nbuilds compilers",
        memory={"notes": ["one", "two <b>"]}, chetana={"affect": {"frustration": 0.2}},
        entries={"notes": (MemoryEntry("notes", "fact", "one"), MemoryEntry("notes", "fact", "two <b>"))},
        steps={"check": {"result": False}},
    )
    return builder, ctx


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_gate_given_only_what_it_reads_decides_as_with_every_variable(expression: str, soul_home: Path) -> None:
    builder, ctx = _builder_and_context(soul_home)
    gates = GateEvaluator(builder.env)
    names = gates.reads(expression)
    assert names is not None and names <= EVERY_NAME | {"range"}
    every = builder.variables(ctx)
    only = builder.variables(ctx, names=names)
    assert set(only) == names & set(every)
    assert all(only[name] == every[name] for name in only)
    assert gates.when_open("s", expression, only) == gates.when_open("s", expression, every)


def test_a_gate_reading_steps_builds_no_other_variable(soul_home: Path) -> None:
    builder, ctx = _builder_and_context(soul_home)
    gates = GateEvaluator(builder.env)
    assert builder.variables(ctx, names=gates.reads("steps.check.result")) == {"steps": {"check": {"result": False}}}


def test_a_gate_that_does_not_parse_is_given_everything_and_fails_as_before(soul_home: Path) -> None:
    builder, ctx = _builder_and_context(soul_home)
    gates = GateEvaluator(builder.env)
    assert gates.reads("steps.check.result and") is None
    with pytest.raises(StepError, match="its `when`"):
        gates.when_open("s", "steps.check.result and", builder.variables(ctx))


def test_a_gate_naming_an_unknown_variable_still_fails_on_it(soul_home: Path) -> None:
    builder, ctx = _builder_and_context(soul_home)
    gates = GateEvaluator(builder.env)
    expression = "nonesuch.x or steps.check.result"
    with pytest.raises(StepError, match="nonesuch"):
        gates.when_open("s", expression, builder.variables(ctx, names=gates.reads(expression)))


def test_the_names_are_the_context_names_and_steps_in_the_order_variables_builds_them(soul_home: Path) -> None:
    builder, ctx = _builder_and_context(soul_home)
    assert set(NAMES) == set(CONTEXT_NAMES) | {"steps"} == EVERY_NAME
    assert tuple(builder.variables(ctx)) == NAMES


def test_variables_read_one_by_one_or_copied_are_every_variable(soul_home: Path) -> None:
    builder, ctx = _builder_and_context(soul_home)
    every = builder.variables(ctx, {"k": 4})
    built: list[tuple[str, ...]] = []

    def build(names: object) -> dict[str, object]:
        built.append(tuple(sorted(names)))  # type: ignore[call-overload]
        return builder.variables(ctx, {"k": 4}, None, names)  # type: ignore[arg-type]

    lazy = Variables(build)
    assert lazy.get("chetana") == every["chetana"] and built == [("chetana",)]
    assert lazy.get("nonesuch") is None and "nonesuch" not in lazy and len(lazy) == len(NAMES)
    copied = dict(lazy)  # as a template renders with it: the rest built at once, in order
    assert copied == every and tuple(copied) == NAMES and len(built) == 2
    template = builder.env.from_string("{{ input.text }} {{ memory.notes | join(',') }} {{ params.k }}")
    assert template.render(Variables(build)) == template.render(every) == "refactor the tokenizer one,two &lt;b&gt; 4"


def test_the_names_templates_and_gates_see_are_the_context_names_and_steps() -> None:
    # gates decide by what they read only among these (`GateEvaluator.inputs`)
    from soul.kinds import CONTEXT_NAMES
    from soul.runtime.turn.prompting.prompt import EVERY_NAME, NAMES

    assert len(NAMES) == len(EVERY_NAME) and {*CONTEXT_NAMES, "steps"} == EVERY_NAME
