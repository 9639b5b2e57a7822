"""An after-the-call gate is decided once (issue 26): the decision made on a fused call's reply
(`AfterTheCall`, asked while the reply is checked) is handed on to the step's application only
when it is provably the one evaluating the gate again would make — the same expression over
the very same values of what it reads; otherwise the gate is evaluated again, as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from souls import claudius_reply

import soul
from soul.errors import StepError
from soul.providers.scripted import ScriptedProvider
from soul.runtime.turn.context import TurnContext, TurnState
from soul.runtime.turn.gates import AfterTheCall, GateEvaluator, output_path
from soul.runtime.turn.prompting.not_run import NotRun
from soul.sections import StepParse


def _parts(home: Path) -> tuple[Any, GateEvaluator, dict[str, Any], Any]:
    s = soul.load("claudius", provider=ScriptedProvider([]), home=home)
    services, plan = s.services, s.plan
    return services.builder, services.gates, services.not_run(plan, plan.turn), plan.turn.steps


@pytest.mark.parametrize(("expression", "inputs"), [
    ("steps.user_check.result", (frozenset(), ("user_check",))),
    ("steps['user_check'].result and not steps.think.text", (frozenset(), ("user_check", "think"))),
    ("state.mood == 'calm' and steps.user_check.result", (frozenset({"state"}), ("user_check",))),
    ("turn.number > 1", (frozenset({"turn"}), ())),
    ("steps | length > 2", None),  # `steps` read whole
    ("steps[input.text].result", None),  # a computed step name
    ("range(3) | list | length == 3", None),  # a global
    ("lipsum() | length > 0", None),
    ("steps.user_check.result and", None),  # does not parse
])
def test_what_a_gate_is_a_function_of_is_found_or_said_unknown(expression: str, inputs: Any, soul_home: Path) -> None:
    _, gates, _, _ = _parts(soul_home)
    assert gates.inputs(expression) == inputs


def _call(soul_home: Path, expression: str) -> tuple[AfterTheCall, TurnState, dict[str, StepParse], Any, GateEvaluator, dict[str, Any]]:
    builder, gates, not_run, planned = _parts(soul_home)
    ctx = TurnContext("hello", user="ada", number=2, state={"mood": "calm"})
    ts = TurnState(ctx, {"recall": {"recollections": None}})
    parses = {"user_check": StepParse({"result": True}, (), ()), "user_update": StepParse({"model": "# Ada", "change_note": "Ada."}, (), ())}
    gated_off = AfterTheCall(builder, gates, not_run, {"user_update": expression}, planned, ts, ctx)
    return gated_off, ts, parses, ctx, gates, not_run


def _evaluated(gates: GateEvaluator, builder: Any, ctx: TurnContext, steps: dict[str, Any], expression: str) -> bool:
    """What evaluating the gate again decides (closed: True), as `ScopeRunner.apply` did."""
    return not gates.when_open("user_update", expression, builder.variables(ctx, None, steps, gates.reads(expression)))


@pytest.mark.parametrize("expression", [
    "steps.user_check.result",
    "not steps.user_check.result",
    "state.mood == 'calm' and steps.user_check.result",
    "steps.user_update.model and steps.user_check.result",
])
def test_a_decision_handed_on_is_the_one_evaluating_again_makes(expression: str, soul_home: Path) -> None:
    gated_off, ts, parses, ctx, gates, not_run = _call(soul_home, expression)
    off = gated_off("user_update", parses)
    # as `apply` leaves the turn's outputs when it comes to the gated step: the call's steps set in order
    for name, parse in parses.items():
        ts.outputs[name] = parse.outputs
    handed = gated_off.decided("user_update", ctx, ts.outputs)
    assert handed is off
    assert handed == _evaluated(gates, gated_off.builder, ctx, {**not_run, **ts.outputs}, expression)


def test_a_decision_is_not_handed_on_when_a_step_it_read_changed_since(soul_home: Path) -> None:
    expression = "steps.user_check.result"
    gated_off, ts, parses, ctx, gates, not_run = _call(soul_home, expression)
    assert gated_off("user_update", parses) is False
    ts.outputs["user_check"] = {"result": False}  # a refusal or a fallback replaced its outputs
    assert gated_off.decided("user_update", ctx, ts.outputs) is None
    assert _evaluated(gates, gated_off.builder, ctx, {**not_run, **ts.outputs}, expression) is True


def test_a_decision_is_not_handed_on_when_a_step_it_read_is_not_set_yet(soul_home: Path) -> None:
    # the gate reads a step of the call that `apply` has not come to: it reads as NotRun there
    expression = "steps.user_update.model"
    gated_off, ts, parses, ctx, gates, not_run = _call(soul_home, expression)
    assert gated_off("user_update", parses) is False
    assert gated_off.decided("user_update", ctx, ts.outputs) is None
    assert _evaluated(gates, gated_off.builder, ctx, {**not_run, **ts.outputs}, expression) is True


def test_a_decision_reading_the_context_is_not_handed_on_over_another_context(soul_home: Path) -> None:
    expression = "state.mood == 'calm' and steps.user_check.result"
    gated_off, ts, parses, ctx, gates, not_run = _call(soul_home, expression)
    assert gated_off("user_update", parses) is False
    ts.outputs.update((name, parse.outputs) for name, parse in parses.items())
    changed = ctx.changed(state={"mood": "stormy"})  # an earlier step of the call changed the state
    assert gated_off.decided("user_update", changed, ts.outputs) is None
    assert _evaluated(gates, gated_off.builder, changed, {**not_run, **ts.outputs}, expression) is True
    # a gate reading only the steps is handed on over any context
    only_steps = _call(soul_home, "steps.user_check.result")[0]
    only_steps("user_update", parses)
    assert only_steps.decided("user_update", changed, ts.outputs) is False


def test_a_gate_of_unknown_inputs_is_never_handed_on(soul_home: Path) -> None:
    gated_off, ts, parses, ctx, _, _ = _call(soul_home, "steps | length > 2")
    gated_off("user_update", parses)
    ts.outputs.update((name, parse.outputs) for name, parse in parses.items())
    assert gated_off.decided("user_update", ctx, ts.outputs) is None


@pytest.mark.parametrize(("check", "status"), [("true", "ran"), ("false", "gated")])
def test_a_claudius_turn_evaluates_its_after_gate_once(check: str, status: str, soul_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply(check=check)]), home=soul_home)
    evaluated: list[str] = []
    when_open = GateEvaluator.when_open

    def counted(self: GateEvaluator, step: str, *args: Any, **kwargs: Any) -> bool:
        evaluated.append(step)
        return when_open(self, step, *args, **kwargs)

    monkeypatch.setattr(GateEvaluator, "when_open", counted)
    result = s.session(user="ada").turn_sync("I build compilers.")
    assert {st.step: st.status for st in result.trace.steps}["user_update"] == status
    assert evaluated == ["user_update"]  # on the reply; its application reuses the decision


@pytest.mark.parametrize(("expression", "path"), [
    ("steps.user_check.result", ("user_check", "result")),
    (" steps['user_check'].result ", ("user_check", "result")),
    ("steps.user_check['result']", ("user_check", "result")),
    ("not steps.user_check.result", None),
    ("steps.user_check", None),
    ("steps.user_check.result.x", None),
    ("steps.items.result", None),  # a dict's attribute: the sandbox reads the method
    ("steps.user_check.keys", None),
    ("state.user_check.result", None),
    ("steps[input.text].result", None),
])
def test_a_gate_that_is_one_output_is_known_by_its_path(expression: str, path: Any, soul_home: Path) -> None:
    _, gates, _, _ = _parts(soul_home)
    assert output_path(gates.env, expression) == path


@pytest.mark.parametrize("expression", ["steps.check.result", "steps['check'].result", "steps.items.result",
                                        "steps.check.get", "not steps.check.result"])
@pytest.mark.parametrize("steps", [
    {"check": {"result": True}}, {"check": {"result": False}}, {"check": {"result": None}},
    {"check": {"result": ""}}, {"check": {"result": "no"}}, {"check": {"result": 0}}, {"check": {"result": []}},
    {"check": {"other": True}}, {"check": NotRun(["result"])}, {}, {"items": {"result": True}},
    {"check": {"result": True, "get": False}},
])
def test_a_gate_read_by_its_path_decides_as_the_sandbox(expression: str, steps: dict[str, Any], soul_home: Path) -> None:
    _, gates, _, _ = _parts(soul_home)
    fn = gates.env.compile_expression(expression, undefined_to_none=False)
    try:
        expected: Any = bool(fn(steps=steps))
    except Exception as exc:  # an undefined output read: the gate fails, as it did
        expected = type(exc)
    try:
        decided: Any = gates.when_open("s", expression, {"steps": steps})
    except StepError as exc:
        decided = type(exc.__cause__)
    assert decided is expected
