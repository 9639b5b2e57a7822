"""The context `before_turn` returns is built lazily (on first read, or before the state it
reads changes): it must hold exactly what an eager context built at the same moment holds,
whatever is called in between and whether or not it is ever read."""

import copy
import dataclasses
import json
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soul.engines.chetana import ChetanaContext, ChetanaController, Focus, Sankalpa

WORDS = ["auth", "login", "bug", "tests", "parser", "session", "token", "cache", "the", "and"]
PHRASES = ["I want to", "let's", "fix the", "add a", "implement", "remove", "make", "exchange"]
TOOLS = ["read", "edit", "bash", "grep"]

text = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(WORDS + PHRASES), max_size=14).map(" ".join),
)
operation = st.one_of(
    st.tuples(st.just("before_turn"), text, st.booleans()),
    st.tuples(st.just("context")),
    st.tuples(
        st.just("tool"),
        st.sampled_from(TOOLS),
        st.booleans(),
        st.floats(min_value=0, max_value=1e4, allow_nan=False),
        text,
        st.booleans(),
    ),
    st.tuples(st.just("after_turn")),
    st.tuples(st.just("spawn")),
    st.tuples(st.just("confidence"), st.floats(0, 1)),
    st.tuples(st.just("disable"), st.sampled_from(TOOLS)),
    st.tuples(st.just("recovery")),
    st.tuples(st.just("achieve"), st.integers(0, 20)),
    # The subsystems called directly, past the controller (the gate must still hold).
    st.tuples(st.just("sankalpa.extract"), text),
    st.tuples(st.just("sankalpa.tool"), st.sampled_from(TOOLS), text),
    st.tuples(st.just("sankalpa.end_turn")),
    st.tuples(st.just("dhyana.track"), text),
    st.tuples(st.just("dhyana.tool"), st.sampled_from(TOOLS), st.booleans()),
    st.tuples(st.just("dhyana.message"), st.booleans(), st.booleans()),
    st.tuples(st.just("dhyana.flag"), st.booleans(), st.booleans()),
    st.tuples(st.just("dhyana.refresh")),
    st.tuples(st.just("atma.record"), st.sampled_from(TOOLS), st.booleans()),
    st.tuples(st.just("atma.end_turn")),
    # A restored controller must wire its gate again, and so must a replaced subsystem.
    st.tuples(st.just("restore")),
    st.tuples(st.just("replace"), st.sampled_from(["dhyana", "atma", "sankalpa"])),
    # What the caller does with the contexts it holds.
    st.tuples(st.just("read"), st.integers(0, 30)),
    st.tuples(st.just("drop"), st.integers(0, 30)),
)


def apply(chetana: ChetanaController, op: tuple, n: int) -> ChetanaContext | None:
    """Run one operation; return the context it handed out, if any."""
    kind = op[0]
    if kind == "before_turn":
        return chetana.before_turn(op[1], correction=op[2])
    if kind == "context":
        return chetana.context()
    if kind == "tool":
        chetana.after_tool_execution(op[1], op[2], op[3], op[4], correction=op[5])
    elif kind == "after_turn":
        chetana.after_turn()
    elif kind == "spawn":
        chetana.on_sub_agent_spawn()
    elif kind == "confidence":
        chetana.update_confidence(op[1])
    elif kind == "disable":
        chetana.mark_tool_disabled(op[1], "flaky")
    elif kind == "recovery":
        chetana.mark_context_recovery()
    elif kind == "achieve":
        intentions = chetana.sankalpa.get_intentions()
        if intentions:
            chetana.achieve(intentions[op[1] % len(intentions)].id)
    elif kind == "sankalpa.extract":
        chetana.sankalpa.extract_from_message(op[1])
    elif kind == "sankalpa.tool":
        chetana.sankalpa.on_tool_result(op[1], op[2])
    elif kind == "sankalpa.end_turn":
        chetana.sankalpa.end_turn()
    elif kind == "dhyana.track":
        chetana.dhyana.track_concepts(op[1])
    elif kind == "dhyana.tool":
        chetana.dhyana.on_tool_used(op[1], op[2])
    elif kind == "dhyana.message":
        chetana.dhyana.add_message(f"m-{n}", op[1], op[2])
    elif kind == "dhyana.flag":
        chetana.dhyana.flag_latest_message(error=op[1], correction=op[2])
    elif kind == "dhyana.refresh":
        chetana.dhyana.refresh_salience()
    elif kind == "atma.record":
        chetana.atma.record_tool_result(op[1], op[2], 10.0, 0.5)
    elif kind == "atma.end_turn":
        chetana.atma.end_turn()
    return None


def replace(chetana: ChetanaController, name: str) -> None:
    """Swap a subsystem for a restored copy of itself (message salience aside, the same)."""
    system = getattr(chetana, name)
    if name == "sankalpa":
        copy_ = type(system).deserialize(system.serialize(), turn=system._turn)
    else:
        copy_ = type(system).deserialize(system.serialize())
    copy_.on_event = system.on_event
    setattr(chetana, name, copy_)


def values(context: ChetanaContext) -> tuple:
    """Everything a context shows, including the lazily ranked focus window."""
    return (
        context.affect,
        context.focus,
        context.focus.messages,
        context.self_assessment,
        context.intentions,
        context.steering,
        json.dumps(context.to_dict(), sort_keys=True),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=50), st.booleans())
def test_a_lazy_context_equals_the_eager_one_of_its_moment(ops, listen):
    # Two controllers take the same calls; one hands out lazy contexts the test keeps, reads
    # now and then or drops, the other builds each context eagerly at that moment.
    events_lazy: list = []
    events_eager: list = []
    lazy = ChetanaController(on_event=(lambda n, d: events_lazy.append((n, d))) if listen else None)
    eager = ChetanaController(
        on_event=(lambda n, d: events_eager.append((n, d))) if listen else None
    )
    held: list[tuple[ChetanaContext, tuple]] = []
    for n, op in enumerate(ops):
        if op[0] == "read":
            if held:
                context, expected = held[op[1] % len(held)]
                assert values(context) == expected
            continue
        if op[0] == "drop":
            if held:
                del held[op[1] % len(held)]
            continue
        if op[0] == "restore":
            lazy = ChetanaController.deserialize(json.loads(json.dumps(lazy.serialize())))
            eager = ChetanaController.deserialize(json.loads(json.dumps(eager.serialize())))
            continue
        if op[0] == "replace":
            for controller in (lazy, eager):
                replace(controller, op[1])
            continue
        context = apply(lazy, op, n)
        if op[0] == "before_turn":
            eager.before_turn(op[1], correction=op[2])
        elif op[0] != "context":
            apply(eager, op, n)
        if context is not None:
            reference = eager._eager_context()
            assert type(reference) is ChetanaContext
            held.append((context, values(reference)))
    for context, expected in held:
        assert values(context) == expected
        assert context == ChetanaContext(*expected[:2], *expected[3:6])
    # Handing out lazy contexts leaves the state and the events exactly as they were.
    assert lazy.serialize() == eager.serialize()
    if not any(op[0] == "restore" for op in ops):  # a restored controller has no callback
        assert events_lazy == events_eager


def test_a_held_context_keeps_the_state_of_its_moment():
    chetana = ChetanaController()
    chetana.before_turn("I want to fix the auth bug")
    chetana.after_tool_execution("read", True, 5.0, "nothing relevant")
    chetana.after_turn()
    context = chetana.before_turn("the parser session token")
    before = chetana._eager_context()
    chetana.after_tool_execution("grep", False, 5.0, "auth bug found")
    chetana.after_turn()
    chetana.mark_tool_disabled("read", "sandboxed")
    assert "grep" not in context.focus.tools
    assert context.self_assessment == before.self_assessment
    assert "limitation" not in context.self_assessment
    assert context.intentions == before.intentions
    assert context.intentions[0].stale_turns == 1
    assert context == before and before == context
    later = chetana.context()
    assert "grep" in later.focus.tools and later != context


def test_a_lazy_context_behaves_as_a_frozen_chetana_context():
    chetana = ChetanaController()
    context = chetana.before_turn("let's add input validation to the parser")
    assert isinstance(context, ChetanaContext)
    assert isinstance(context.focus, Focus)
    assert [f.name for f in dataclasses.fields(context)] == [
        "affect", "focus", "self_assessment", "intentions", "steering",
    ]  # fmt: skip
    try:
        context.focus = None  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a context must be frozen")
    assert repr(context).startswith("ChetanaContext(affect=Affect(")
    assert context.intentions[0].goal == "add input validation to the parser"
    for twin in (copy.copy(context), pickle.loads(pickle.dumps(context))):
        assert type(twin) is ChetanaContext
        assert twin == context
    replaced = dataclasses.replace(context, steering=["x"])
    assert replaced.steering == ["x"] and replaced.focus == context.focus
    assert context.active_intentions is context.intentions
    assert context.steering_suggestions is context.steering
    assert context.attention is context.focus


def test_an_unread_context_costs_no_work_once_dropped(monkeypatch):
    # The context nobody keeps is never built: the subsystems' readers are not called.
    chetana = ChetanaController()
    chetana.before_turn("the parser session token")
    calls = []
    original = Sankalpa.get_active_intentions

    def counting(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(Sankalpa, "get_active_intentions", counting)
    chetana.before_turn("another message about the cache")
    chetana.after_tool_execution("read", True, 1.0, "cache")
    chetana.after_turn()
    assert calls == []
    kept = chetana.before_turn("and one that is kept")
    chetana.after_tool_execution("read", True, 1.0, "cache")
    assert calls == [1]
    assert kept.intentions == []


def test_a_restored_controller_hands_out_exact_lazy_contexts():
    # deserialize() builds new subsystems: they must share the new controller's gate.
    chetana = ChetanaController()
    chetana.before_turn("I want to fix the auth bug")
    chetana.after_tool_execution("read", True, 1.0, "auth bug")
    chetana = ChetanaController.deserialize(json.loads(json.dumps(chetana.serialize())))
    context = chetana.before_turn("the parser session")
    reference = chetana._eager_context()
    chetana.after_tool_execution("grep", False, 1.0, "auth bug")
    chetana.mark_tool_disabled("read", "sandboxed")
    chetana.after_turn()
    assert values(context) == values(reference)
    assert "grep" not in context.focus.tools


def test_a_replaced_subsystem_joins_the_gate():
    chetana = ChetanaController()
    chetana.before_turn("I want to fix the auth bug")
    context = chetana.before_turn("the parser session")
    reference = chetana._eager_context()
    old = chetana.dhyana
    chetana.dhyana = type(old).deserialize(old.serialize())  # settles the waiting context
    chetana.after_tool_execution("grep", False, 1.0, "auth bug")
    old.track_concepts("a replaced subsystem no longer holds the gate")
    later = chetana.context()
    reference_later = chetana._eager_context()
    chetana.dhyana.on_tool_used("edit", True)
    chetana.after_turn()
    assert values(context) == values(reference)
    assert values(later) == values(reference_later)
