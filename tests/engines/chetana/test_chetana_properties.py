"""Properties over arbitrary call sequences: every value stays in range, the state survives
serialize -> JSON -> deserialize -> serialize unchanged, and ids are FNV-1a of the goal."""

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soul.engines.chetana import (
    ChetanaConfig,
    ChetanaController,
    CognitivePriors,
    Sankalpa,
    fnv1a_32,
    normalize_goal,
)

WORDS = ["auth", "login", "bug", "tests", "parser", "session", "token", "cache", "the", "and"]
PHRASES = ["I want to", "let's", "fix the", "add a", "implement", "remove", "make", "exchange"]
TOOLS = ["read", "edit", "bash", "grep"]

text = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(WORDS + PHRASES), max_size=14).map(" ".join),
)
# what may happen between a turn's message and its end
between = st.one_of(
    st.tuples(
        st.just("tool"),
        st.sampled_from(TOOLS),
        st.booleans(),
        st.floats(min_value=0, max_value=1e6, allow_nan=False),
        text,
        st.booleans(),
    ),
    st.tuples(st.just("spawn")),
    st.tuples(st.just("confidence"), st.floats(allow_nan=False)),
    st.tuples(st.just("disable"), st.sampled_from(TOOLS), st.sampled_from(["flaky", "sandbox"])),
    st.tuples(st.just("recovery")),
    st.tuples(st.just("achieve"), st.integers(min_value=0, max_value=20)),
)
operation = st.one_of(
    st.tuples(st.just("before_turn"), text, st.booleans()),
    between,
    st.tuples(st.just("after_turn")),
)
config = st.builds(
    ChetanaConfig,
    affect_decay_rate=st.floats(0, 1),
    attention_focus_window=st.integers(1, 300),
    goal_abandonment_threshold=st.integers(1, 20),
    frustration_per_error=st.floats(0, 1),
    frustration_per_correction=st.floats(0, 1),
    attention_recency_lambda=st.floats(0, 5),
    attention_error_boost=st.floats(0, 3),
    attention_correction_boost=st.floats(0, 3),
    calibration_window=st.integers(1, 600),
    max_limitations=st.integers(1, 5),
    max_intentions=st.integers(1, 5),
    max_evidence_per_intention=st.integers(1, 5),
)
priors = st.builds(
    CognitivePriors,
    base_arousal=st.floats(0, 1),
    emotional_reactivity=st.floats(0, 1),
    goal_orientedness=st.floats(0, 1),
    self_awareness=st.floats(0, 1),
)


def play(chetana: ChetanaController, ops) -> None:
    for op in ops:
        kind = op[0]
        if kind == "before_turn":
            chetana.before_turn(op[1], correction=op[2])
        elif kind == "tool":
            chetana.after_tool_execution(op[1], op[2], op[3], op[4], correction=op[5])
        elif kind == "after_turn":
            chetana.after_turn()
        elif kind == "spawn":
            chetana.on_sub_agent_spawn()
        elif kind == "confidence":
            chetana.update_confidence(op[1])
        elif kind == "disable":
            chetana.mark_tool_disabled(op[1], op[2])
        elif kind == "recovery":
            chetana.mark_context_recovery()
        else:
            intentions = chetana.cognitive_report().intentions
            if intentions:
                chetana.achieve(intentions[op[1] % len(intentions)].id)


def in_unit(x: float) -> bool:
    return math.isfinite(x) and 0.0 <= x <= 1.0


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(config, priors, st.lists(operation, max_size=40))
def test_every_value_stays_in_its_range(cfg, pri, ops):
    chetana = ChetanaController(cfg, priors=pri)
    play(chetana, ops)
    report = chetana.cognitive_report()
    affect = report.affect
    assert -1.0 <= affect.valence <= 1.0
    assert all(in_unit(x) for x in (affect.arousal, affect.confidence, affect.frustration))
    assert all(in_unit(c.weight) for c in report.concepts)
    assert all(in_unit(w) for w in chetana.dhyana.concepts.values())
    assert len(chetana.dhyana.concepts) <= 100
    assert all(in_unit(t.weight) for t in report.tools)
    assert all(0.0 <= s <= 2.0 for s in chetana.dhyana.get_weights().messages.values())
    assert len(chetana.focus_window()) <= cfg.attention_focus_window
    assert 0.0 <= report.calibration <= 10.0
    assert math.isfinite(report.learning_velocity) and abs(report.learning_velocity) <= 0.1
    for row in report.mastery:
        assert 0.0 <= row.ci_low <= row.success_rate <= row.ci_high <= 1.0
        assert 0 <= row.successes <= row.total and row.avg_latency >= 0
    assert all(in_unit(v) for v in report.style.values())
    assert len(report.limitations) <= cfg.max_limitations
    assert len(report.intentions) <= cfg.max_intentions
    for intention in report.intentions:
        assert in_unit(intention.progress) and intention.stale_turns >= 0
        assert len(intention.evidence) <= cfg.max_evidence_per_intention
        assert intention.priority in ("low", "normal", "high", "critical")
    assert len(report.self_assessment) < 200
    json.dumps(chetana.serialize(), allow_nan=False)


@FAST
@given(config, st.lists(operation, max_size=40))
def test_serialize_json_deserialize_serialize_is_identical(cfg, ops):
    chetana = ChetanaController(cfg)
    play(chetana, ops)
    state = chetana.serialize()
    restored = ChetanaController.deserialize(json.loads(json.dumps(state, allow_nan=False)), cfg)
    assert restored.serialize() == state


@FAST
@given(st.lists(operation, max_size=30), st.lists(operation, max_size=10))
def test_a_restored_controller_behaves_like_the_original(before, after):
    chetana = ChetanaController()
    play(chetana, before)
    restored = ChetanaController.deserialize(json.loads(json.dumps(chetana.serialize())))
    # Message salience is not persisted; close the turn so both start from the same place.
    chetana.after_turn()
    restored.after_turn()
    chetana.dhyana = type(chetana.dhyana).deserialize(chetana.dhyana.serialize())
    restored.dhyana = type(restored.dhyana).deserialize(restored.dhyana.serialize())
    play(chetana, after)
    play(restored, after)
    assert restored.serialize() == chetana.serialize()


@settings(max_examples=150, deadline=None)
@given(st.lists(text, min_size=1, max_size=5))
def test_intention_ids_are_fnv1a_of_the_normalized_goal(messages):
    sankalpa = Sankalpa(ChetanaConfig(max_intentions=50))
    for message in messages:
        sankalpa.extract_from_message(message)
    for intention in sankalpa.get_intentions():
        assert intention.id == format(fnv1a_32(normalize_goal(intention.goal)), "x")
        assert intention.id == format(fnv1a_32(" ".join(intention.goal.lower().split())), "x")
        assert intention.goal == intention.goal.strip() and intention.goal


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_fnv1a_is_a_32_bit_hash_of_the_utf8_bytes(value):
    expected = 0x811C9DC5
    for byte in value.encode("utf-8"):
        expected = ((expected ^ byte) * 0x01000193) % 2**32
    assert fnv1a_32(value) == expected


# a turn as a host drives it: the user's message (a correction or not), what happens, its end
turn = st.tuples(text, st.booleans(), st.lists(between, max_size=6))


def _turn(chetana: ChetanaController, message: tuple) -> dict:  # type: ignore[type-arg]
    words, correction, ops = message
    context = chetana.before_turn(words, correction=correction).to_dict()
    play(chetana, ops)
    report = chetana.cognitive_report().to_dict()
    chetana.after_turn()
    return {"context": context, "report": report, "state": chetana.serialize()}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config, priors, st.lists(turn, max_size=6), st.lists(turn, min_size=1, max_size=4))
def test_a_rested_controller_goes_on_as_its_restore_would(cfg, pri, before, after):
    # a session keeps its controller between turns (soul.runtime.bridges.chetana.Kept) instead
    # of restoring it; after `rest` it must be the restore of what it serialized, turn by turn:
    # the same contexts, reports, states and events
    live_events, restored_events = [], []
    live = ChetanaController(cfg, lambda name, data: live_events.append((name, dict(data))), priors=pri)
    for message in before:
        _turn(live, message)
    state = json.loads(json.dumps(live.serialize(), allow_nan=False))
    live.rest()
    live_events.clear()
    restored = ChetanaController.deserialize(state, cfg, lambda name, data: restored_events.append((name, dict(data))), pri)
    for message in after:
        assert _turn(live, message) == _turn(restored, message)
        live.rest()
        restored.rest()
    assert live_events == restored_events
