"""Graph shapes → plan: layers, call groups (fused/chained) and gate phases, as a table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from soul.compiler.plan import compile_blueprint
from soul.errors import BlueprintInvalid

Write = Callable[..., Path]

# name, mode, steps (name: "kind[@model] <- deps"), expected units (steps per unit), expected layers
CASES = [
    ("single step", "fused", ["reply: external_dialogue"], [["reply"]], [[1]]),
    (
        "claudius chain fuses into one call",
        "fused",
        ["think: internal_monologue", "reply: external_dialogue <- think", "check: user_model_check <- reply"],
        [["think", "reply", "check"]],
        [[1]],
    ),
    (
        "chained: one call per step, one layer per link",
        "chained",
        ["think: internal_monologue", "reply: external_dialogue <- think", "check: user_model_check <- reply"],
        [["think"], ["reply"], ["check"]],
        [[1], [2], [3]],
    ),
    (
        "a non-LLM step between two LLM steps splits the fused call",
        "fused",
        ["think: internal_monologue", "recall: memory.recall <- think", "reply: external_dialogue <- recall"],
        [["think"], ["recall"], ["reply"]],
        [[1], [2], [3]],
    ),
    (
        "a non-LLM step beside the call runs in parallel with it",
        "fused",
        ["recall: memory.recall", "think: internal_monologue", "reply: external_dialogue <- think"],
        [["recall"], ["think", "reply"]],
        [[1, 2]],
    ),
    (
        "fan-out and join in chained mode run concurrently",
        "chained",
        [
            "think: internal_monologue",
            "a: mental_query <- think",
            "b: mental_query <- think",
            "c: mental_query <- think",
            "reply: external_dialogue <- a b c",
        ],
        [["think"], ["a"], ["b"], ["c"], ["reply"]],
        [[1], [2, 3, 4], [5]],
    ),
    (
        "steps on another model make their own call when not in between",
        "fused",
        ["think: internal_monologue", "reply: external_dialogue <- think", "side: mental_query@fast"],
        [["think", "reply"], ["side"]],
        [[1, 2]],
    ),
]


def _blueprint(mode: str, specs: list[str]) -> str:
    lines = ["soul: t", "version: 1", f"mode: {mode}", "models: {fast: openai/gpt-4o-mini}", "steps:"]
    for spec in specs:
        name, rest = spec.split(": ", 1)
        kind, _, deps = rest.partition(" <- ")
        kind, _, model = kind.partition("@")
        entry = f"  {name}: {{uses: {kind}"
        if kind == "mental_query":
            entry += ", with: {query: q}"
        if model:
            entry += f", model: {model}"
        if deps:
            entry += f", after: [{', '.join(deps.split())}]"
        lines.append(entry + "}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("title", "mode", "specs", "units", "layers"), CASES, ids=[c[0] for c in CASES])
def test_plan_shapes(write_blueprint: Write, title: str, mode: str, specs: list[str], units: list[list[str]], layers: list[list[int]]) -> None:
    plan = compile_blueprint(write_blueprint(_blueprint(mode, specs)))
    assert [list(u.steps) for u in plan.turn.units] == units
    assert [list(layer) for layer in plan.turn.layers] == layers


def test_a_gate_on_a_step_of_the_same_fused_call_is_decided_after_the_call() -> None:
    plan = compile_blueprint("claudius")
    gates = {name: ps.gate for name, ps in plan.turn.steps.items() if ps.gate}
    assert gates["user_update"].phase == "after"  # type: ignore[union-attr]
    assert gates["state_check"].every == 3 and gates["state_check"].phase == "before"  # type: ignore[union-attr]


def test_in_chained_mode_every_gate_is_decided_before_its_call() -> None:
    plan = compile_blueprint("samantha")
    gate = plan.subprocesses["learns_about_user"].steps["remember_user"].gate
    assert gate is not None and gate.phase == "before"


def test_fused_sections_follow_file_order_where_dependencies_allow() -> None:
    plan = compile_blueprint("claudius")
    assert plan.turn.units[0].steps == ("recall",)  # memory first: no model call
    assert plan.turn.units[1].steps == ("think", "reply", "user_check", "user_update", "state_check", "state_update")


def test_compiling_an_invalid_blueprint_raises_with_every_diagnostic(write_blueprint: Write) -> None:
    path = write_blueprint("soul: t\nversion: 1\nsteps:\n  a: {uses: nope}\n  b: {uses: nada}\n")
    with pytest.raises(BlueprintInvalid) as info:
        compile_blueprint(path)
    assert len(info.value.diagnostics) == 2
    assert "2 errors in blueprint" in str(info.value)


def test_the_plan_text_is_stable_across_compiles() -> None:
    assert compile_blueprint("claudius").text() == compile_blueprint("claudius").text()
