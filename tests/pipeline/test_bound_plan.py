"""The bound plan: a Plan and its services are enough to run a turn; `soul explain` walks the
same turn code; the initial soul state is built in one place."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import soul
import soul.kinds.registry as registry_module
from soul.compiler import Gate, Plan, compile_blueprint
from soul.errors import StepError
from soul.kinds import Registry, default_registry
from soul.providers.scripted import ScriptedProvider
from soul.runtime import dry_services, explain, services_for
from soul.runtime.dry_run import DryRun, first_snapshot
from soul.runtime.events import Trace
from soul.runtime.turn import ScopeRunner, build_commit, context_for, start_turn

GATED = """\
soul: gated
version: 1
mode: fused
state:
  mood: {default: calm}
steps:
  check:  {uses: user_model_check}
  often:  {uses: internal_monologue, every: 2}
  reply:  {uses: external_dialogue, after: [check, often]}
  update: {uses: user_model_update, after: [check], when: steps.check.result}
subprocesses:
  notes:
    every: 2
    when: steps.check.result
    steps:
      noticed: {uses: mental_query, with: {query: Anything new?}}
"""


def _reply(check: str = "true", thought: bool = False) -> str:
    reply = f"<user_model_check>{check}</user_model_check>"
    if thought:
        reply = '<internal_monologue verb="mused">Hm.</internal_monologue>' + reply
    return reply + (
        '<external_dialogue verb="said">Hello!</external_dialogue>'
        "<user_model_update># Ada</user_model_update><model_change_note>Met Ada.</model_change_note>"
    )


def _resolver(provider: ScriptedProvider) -> Any:
    return lambda model: (provider, model, {})


def test_each_planned_step_carries_its_kind_params_template_and_gate(write_blueprint: Any) -> None:
    plan = compile_blueprint(write_blueprint(GATED))
    registry = default_registry()
    for name, step in plan.turn.steps.items():
        written = plan.blueprint.steps[name]
        assert step.kind is registry.get(written.uses)
        assert (step.params, step.template) == (written.params, written.template)
    assert plan.turn.steps["often"].gate == Gate(every=2)
    assert plan.turn.steps["update"].gate == Gate(when="steps.check.result", phase="after")
    assert all(plan.turn.unit(u.index) is u for u in plan.turn.units)
    # a subprocess's own gate lives in the plan, beside its steps
    assert plan.subprocesses["notes"].gate == Gate(every=2, when="steps.check.result")
    assert plan.subprocesses["notes"].steps["noticed"].params == {"query": "Anything new?"}


def test_a_plan_and_its_services_run_a_turn_without_a_soul_or_the_registry(write_blueprint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = compile_blueprint(write_blueprint(GATED))
    provider = ScriptedProvider([_reply()])
    services = services_for(plan, providers=_resolver(provider))
    monkeypatch.setattr(registry_module, "_default", Registry())  # no kind can be looked up now
    snapshot = first_snapshot(plan, "ada")
    ts = start_turn(plan, services, snapshot, "Hi, I'm Ada.", "message")
    asyncio.run(ScopeRunner(plan, plan.turn, services).run(ts))
    commit, reply = build_commit(snapshot, ts, list(plan.turn.steps), "message", Trace(1, "message", "Hi, I'm Ada."))
    assert reply == "Hello!"
    assert {s.step: s.status for s in ts.steps} == {"often": "skipped", "check": "ran", "reply": "ran", "update": "ran"}
    assert commit.user_model is not None and commit.user_model.text == "# Ada"
    assert provider.calls == 1


def test_explain_walks_the_gates_a_real_turn_walks(write_blueprint: Any, soul_home: Path) -> None:
    path = write_blueprint(GATED)
    s = soul.load(path, provider=ScriptedProvider([_reply(), _reply("false", thought=True)]), home=soul_home)
    session = s.session(user="ada")
    first = session.turn_sync("Hi, I'm Ada.")
    [call] = explain(s.plan, "Hi, I'm Ada.", user="ada")
    assert first.trace is not None and [c.steps for c in first.trace.calls] == [call.steps] == [("check", "reply", "update")]
    skipped = [st.step for st in first.trace.steps if st.status == "skipped"]
    assert skipped == [name for name, _ in call.skipped] == ["often"]
    assert call.skipped == (("often", "every 2: runs on turns 2, 4, ..."),)
    assert call.after_gates == (("update", "steps.check.result"),)
    # and the dry run's prompt is the real turn's first prompt, word for word
    assert first.trace.calls[0].messages == call.messages
    second = session.turn_sync("Still me.")  # turn 2: `often` runs, the false check closes `update`
    assert second.trace is not None
    assert {st.step: st.status for st in second.trace.steps} == {"often": "ran", "check": "ran", "reply": "ran", "update": "gated"}
    s.close()


def test_the_dry_run_is_the_turn_walk_with_nothing_real_done(write_blueprint: Any) -> None:
    plan = compile_blueprint(write_blueprint(GATED))
    services = dry_services(plan)
    assert services.providers is None and services.memory is None
    ts = start_turn(plan, services, first_snapshot(plan, "ada"), "hi", "message")
    asyncio.run(DryRun(plan, plan.turn, services).run(ts))
    assert ts.changes == {}  # nothing would be committed
    assert ts.outputs["check"] == {"result": "⟨steps.check.result⟩"}
    assert {s.step: s.status for s in ts.steps} == {"often": "skipped", "check": "ran", "reply": "ran", "update": "ran"}


def test_the_initial_state_is_built_in_one_place(write_blueprint: Any, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = compile_blueprint(write_blueprint(GATED))
    assert plan.initial_state() == {"mood": "calm"}
    assert plan.initial_state({"mood": "sunny", "undeclared": 1}) == {"mood": "sunny"}
    made: list[Any] = []

    def patched(self: Plan, stored: Any = None) -> dict[str, Any]:
        made.append(stored)
        return {"mood": "patched"}

    monkeypatch.setattr(Plan, "initial_state", patched)
    s = soul.load(write_blueprint(GATED), provider=ScriptedProvider([_reply()]), home=soul_home)
    session = s.session(user="ada")  # the new session stores it
    assert s.store.snapshot(session.id).state == {"mood": "patched"}
    assert context_for(s.plan, s.store.snapshot(session.id), "hi", "message").state == {"mood": "patched"}
    [call] = explain(s.plan, "hi")  # the dry run starts from it too: the changed mood is shown
    assert "## Soul State\n- mood: patched" in call.messages[0].content
    assert len(made) >= 3
    s.close()


def test_a_failing_gate_names_its_step_and_kind(write_blueprint: Any, soul_home: Path) -> None:
    text = GATED.replace("when: steps.check.result}", "when: steps.check.result.nope.deeper}")  # the step's, not the subprocess's
    s = soul.load(write_blueprint(text), provider=ScriptedProvider([_reply()]), home=soul_home)
    with pytest.raises(StepError) as caught:
        s.session(user="ada").turn_sync("hi")
    assert (caught.value.step, caught.value.kind) == ("update", "user_model_update")
    assert str(caught.value).startswith("step 'update': its `when` (steps.check.result.nope.deeper) failed: ")
    s.close()
