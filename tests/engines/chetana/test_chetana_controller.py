"""ChetanaController: the turn lifecycle across the four subsystems, steering, the context
and report, external signals, disabling, input errors and persistence."""

import json
import math

import pytest

from soul.engines.chetana import (
    Affect,
    ChetanaConfig,
    ChetanaContext,
    ChetanaController,
    CognitivePriors,
    CognitiveReport,
    Focus,
    InputError,
    StateError,
)
from soul.engines.chetana.controller import (
    STEER_CONFIDENT,
    STEER_FRUSTRATED,
    STEER_OVERCONFIDENT,
    STEER_UNDERCONFIDENT,
)


def recorder():
    events = []
    return events, lambda name, data: events.append((name, data))


def test_a_new_controller_reports_a_neutral_state():
    report = ChetanaController().cognitive_report()
    assert isinstance(report, CognitiveReport)
    assert report.affect == Affect(0.0, 0.3, 0.5, 0.0)


def test_a_partial_config_mapping_overrides_defaults():
    chetana = ChetanaController({"frustration_per_error": 0.5})
    chetana.after_tool_execution("bash", False, 100, "error")
    assert chetana.cognitive_report().affect.frustration == pytest.approx(0.5)
    assert ChetanaController(ChetanaConfig(max_intentions=3)).config.max_intentions == 3


def test_before_turn_returns_the_context_with_the_named_attributes():
    ctx = ChetanaController().before_turn("implement authentication system")
    assert isinstance(ctx, ChetanaContext)
    assert (ctx.affect.valence, ctx.affect.arousal) == (0.0, 0.3)
    assert (ctx.affect.confidence, ctx.affect.frustration) == (0.5, 0.0)
    assert isinstance(ctx.focus, Focus)
    assert isinstance(ctx.self_assessment, str) and ctx.self_assessment
    assert isinstance(ctx.intentions, list) and isinstance(ctx.steering, list)


def test_before_turn_extracts_intentions():
    ctx = ChetanaController().before_turn("I want to add authentication")
    assert [i.goal for i in ctx.intentions] == ["add authentication"]


def test_before_turn_tracks_concepts():
    chetana = ChetanaController()
    ctx = chetana.before_turn("implement authentication system with JWT tokens")
    assert "authentication" in ctx.focus
    names = [c.name for c in chetana.cognitive_report().concepts]
    assert "implement" in names and "authentication" in names


def test_before_turn_registers_the_turn_for_salience():
    chetana = ChetanaController()
    for _ in range(3):
        chetana.before_turn("hello")
        chetana.after_turn()
    assert chetana.focus_window() == ["turn-2", "turn-1", "turn-0"]


def test_a_tool_result_updates_all_four_subsystems():
    chetana = ChetanaController()
    chetana.before_turn("implement authentication system")
    chetana.after_tool_execution("grep", False, 100, "error: no match")
    chetana.after_tool_execution("edit", True, 20, "authentication system written")
    report = chetana.cognitive_report()
    assert report.affect.frustration > 0
    assert [t.name for t in report.tools] == ["edit", "grep"]
    assert {row.tool for row in report.mastery} == {"grep", "edit"}
    assert report.intentions[0].progress == pytest.approx(0.1)


def test_a_failed_tool_flags_the_turn_message_as_an_error():
    chetana = ChetanaController()
    for _ in range(3):
        chetana.before_turn("hello")
        chetana.after_turn()
    chetana.before_turn("hello")
    chetana.after_tool_execution("bash", False, 5, "boom")
    messages = chetana.dhyana.get_weights().messages
    assert messages["turn-2"] > 1.0 and messages["turn-1"] > 1.0


def test_after_turn_decays_affect():
    chetana = ChetanaController()
    chetana.before_turn("implement authentication")
    chetana.after_tool_execution("bash", False, 50, "error")
    before = chetana.cognitive_report().affect.frustration
    chetana.after_turn()
    assert chetana.cognitive_report().affect.frustration < before
    assert chetana.turn == 1


def test_high_frustration_steers_toward_a_simpler_approach():
    chetana = ChetanaController()
    for _ in range(10):
        chetana.after_tool_execution("bash", False, 50, "error")
    assert STEER_FRUSTRATED in chetana.before_turn("still failing").steering


def test_high_confidence_allows_autonomy():
    chetana = ChetanaController()
    chetana.update_confidence(0.95)
    assert chetana.before_turn("go on").steering == [STEER_CONFIDENT]


def test_a_stalling_goal_is_named_in_the_steering():
    chetana = ChetanaController()
    chetana.before_turn("implement authentication system")
    for _ in range(8):  # more than half of 15
        chetana.after_turn()
    steering = chetana.before_turn("what should I do next?").steering
    assert "Goal 'authentication system' may be stalling — refocus?" in steering


def test_calibration_uses_the_tools_own_success_rate_as_the_prediction():
    # The original passed no prediction, so its calibration sat at 1.0 forever.
    chetana = ChetanaController()
    for _ in range(10):
        chetana.after_tool_execution("edit", True, 5, "ok")
    for _ in range(5):
        chetana.after_tool_execution("edit", False, 5, "failed")
    report = chetana.cognitive_report()
    assert report.calibration > 1.3 and report.calibration_label == "overconfident"
    assert STEER_OVERCONFIDENT in chetana.before_turn("again").steering


def test_a_tool_that_starts_failing_then_succeeds_reads_as_underconfident():
    chetana = ChetanaController()
    for _ in range(5):
        chetana.after_tool_execution("edit", False, 5, "failed")
    for _ in range(5):
        chetana.after_tool_execution("edit", True, 5, "ok")
    assert chetana.cognitive_report().calibration < 0.7
    assert STEER_UNDERCONFIDENT in chetana.before_turn("again").steering


def test_self_awareness_narrows_the_calibration_band():
    keen = ChetanaController(priors=CognitivePriors(self_awareness=1.0))
    dull = ChetanaController(priors=CognitivePriors(self_awareness=0.0))
    for chetana in (keen, dull):
        for ok in [True] * 6 + [False] * 2:
            chetana.after_tool_execution("edit", ok, 5, "")
    assert keen.atma.calibration == dull.atma.calibration
    assert 1.15 < keen.atma.calibration < 1.45
    assert STEER_OVERCONFIDENT in keen.before_turn("x").steering
    assert STEER_OVERCONFIDENT not in dull.before_turn("x").steering


def test_the_cognitive_report_has_every_section():
    chetana = ChetanaController()
    chetana.before_turn("implement authentication system")
    chetana.after_tool_execution("grep", True, 50, "found auth module")
    chetana.after_tool_execution("read", True, 30, "reading auth file")
    chetana.after_turn()
    report = chetana.cognitive_report()
    assert report.concepts and report.tools and report.mastery
    assert isinstance(report.calibration, float) and isinstance(report.learning_velocity, float)
    assert report.mastery[0].ci_low <= report.mastery[0].success_rate <= report.mastery[0].ci_high
    assert set(report.style) == {
        "exploration_vs_exploitation",
        "tool_density",
        "error_recovery_speed",
    }
    assert report.intentions[0].stale_turns == 1 and report.achieved == 0
    assert isinstance(report.limitations, tuple)


def test_achieved_goals_are_counted_in_the_report():
    chetana = ChetanaController()
    ctx = chetana.before_turn("implement alpha and build a bravo")
    assert chetana.achieve(ctx.intentions[0].id)
    report = chetana.cognitive_report()
    assert report.achieved == 1 and len(report.active_intentions) == 1


def test_sub_agent_spawn_raises_arousal():
    chetana = ChetanaController()
    chetana.on_sub_agent_spawn()
    assert chetana.cognitive_report().affect.arousal == pytest.approx(0.4)


def test_update_confidence_reaches_the_affect():
    chetana = ChetanaController()
    chetana.update_confidence(0.95)
    assert chetana.cognitive_report().affect.confidence == pytest.approx(0.95)


def test_mark_tool_disabled_and_context_recovery_become_limitations():
    chetana = ChetanaController()
    chetana.mark_tool_disabled("bash", "security sandbox")
    chetana.mark_context_recovery()
    limitations = chetana.cognitive_report().limitations
    assert limitations[0] == "Tool bash unreliable: security sandbox"
    assert "Context loss" in limitations[1]


def test_events_flow_through_one_callback():
    events, on_event = recorder()
    chetana = ChetanaController(on_event=on_event)
    chetana.before_turn("Let's fix the login bug")
    for _ in range(5):
        chetana.after_tool_execution("bash", False, 5, "error")
    chetana.update_confidence(0.9)
    names = [name for name, _ in events]
    assert names[:2] == ["goal_created", "attention_shifted"]
    assert names.count("self_updated") == 5
    assert names.count("frustrated") == 1 and names.count("confident") == 1


def test_the_event_callback_can_be_set_later():
    events, on_event = recorder()
    chetana = ChetanaController()
    chetana.on_event = on_event
    chetana.after_tool_execution("grep", True, 1, "")
    assert [name for name, _ in events] == ["self_updated"]


def test_a_bad_call_is_rejected_before_any_change():
    chetana = ChetanaController()
    before = chetana.serialize()
    for args in (
        ("grep", False, -1.0, ""),
        ("grep", False, math.nan, ""),
        (42, False, 1.0, ""),
        ("grep", False, 1.0, b"bytes"),
    ):
        with pytest.raises(InputError):
            chetana.after_tool_execution(*args)
    with pytest.raises(InputError):
        chetana.before_turn(123)  # type: ignore[arg-type]
    assert chetana.serialize() == before


def test_a_disabled_controller_changes_nothing():
    chetana = ChetanaController(ChetanaConfig(enabled=False))
    before = chetana.serialize()
    ctx = chetana.before_turn("Let's fix the login bug")
    chetana.after_tool_execution("bash", False, 5, "error")
    chetana.after_turn()
    chetana.on_sub_agent_spawn()
    chetana.update_confidence(1.0)
    chetana.mark_tool_disabled("bash", "x")
    chetana.mark_context_recovery()
    assert ctx.intentions == [] and ctx.steering == []
    assert chetana.serialize() == before


def test_context_to_dict_is_json_safe():
    chetana = ChetanaController()
    ctx = chetana.before_turn("Let's fix the login bug")
    data = ctx.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["intentions"][0]["goal"] == "fix the login bug"


def full_session() -> ChetanaController:
    chetana = ChetanaController()
    chetana.before_turn("implement authentication system")
    chetana.after_tool_execution("grep", True, 50, "found auth module")
    chetana.after_tool_execution("bash", False, 100, "command failed")
    chetana.after_turn()
    chetana.before_turn("no, I meant the session tokens", correction=True)
    chetana.after_tool_execution("edit", True, 30, "session tokens", correction=True)
    chetana.mark_tool_disabled("bash", "sandbox")
    return chetana


def test_serialize_round_trips_through_json_identically():
    chetana = full_session()
    state = chetana.serialize()
    assert set(state) == {"version", "turn", "affect", "attention", "self_model", "intentions"}
    text = json.dumps(state, allow_nan=False)
    restored = ChetanaController.deserialize(json.loads(text))
    assert restored.serialize() == state
    report, again = chetana.cognitive_report(), restored.cognitive_report()
    assert again.affect == report.affect and again.calibration == report.calibration
    assert again.intentions == report.intentions and again.mastery == report.mastery


def test_a_restored_controller_continues_exactly_like_the_original():
    chetana = full_session()
    restored = ChetanaController.deserialize(json.loads(json.dumps(chetana.serialize())))
    for system in (chetana, restored):
        system.after_turn()
        system.before_turn("Let's fix the session tokens")
        system.after_tool_execution("edit", False, 7, "session tokens broken")
        system.after_turn()
    assert restored.serialize() == chetana.serialize()


def test_deserialize_takes_config_priors_and_callback():
    events, on_event = recorder()
    restored = ChetanaController.deserialize(
        full_session().serialize(),
        ChetanaConfig(frustration_per_error=0.3),
        on_event,
        CognitivePriors(base_arousal=0.5),
    )
    assert restored.config.frustration_per_error == 0.3
    assert restored.priors.base_arousal == 0.5
    restored.after_tool_execution("grep", True, 1, "")
    assert events and events[-1][0] == "self_updated"


def test_without_self_model_persistence_the_self_model_starts_fresh():
    chetana = ChetanaController(ChetanaConfig(self_model_persistence=False))
    chetana.after_tool_execution("grep", True, 1, "")
    state = chetana.serialize()
    assert state["self_model"] is None
    restored = ChetanaController.deserialize(state, chetana.config)
    assert restored.cognitive_report().mastery == ()
    assert restored.serialize() == state


def test_deserialize_reports_the_path_of_a_bad_value():
    state = full_session().serialize()
    broken = json.loads(json.dumps(state))
    broken["affect"]["valence"] = "very"
    with pytest.raises(StateError, match=r"affect\.valence"):
        ChetanaController.deserialize(broken)
    broken = json.loads(json.dumps(state))
    del broken["intentions"]
    with pytest.raises(StateError, match=r"state\.intentions is missing"):
        ChetanaController.deserialize(broken)
    with pytest.raises(StateError, match="newer"):
        ChetanaController.deserialize({**state, "version": 99})
    with pytest.raises(StateError):
        ChetanaController.deserialize([])  # type: ignore[arg-type]
    broken = json.loads(json.dumps(state))
    broken["self_model"]["tool_mastery"]["grep"]["successes"] = 99
    with pytest.raises(StateError, match="exceeds"):
        ChetanaController.deserialize(broken)


def test_context_and_report_also_answer_to_the_originals_names():
    chetana = ChetanaController()
    ctx = chetana.before_turn("I want to add authentication")
    assert ctx.active_intentions is ctx.intentions
    assert ctx.steering_suggestions is ctx.steering
    assert ctx.attention is ctx.focus
    report = chetana.cognitive_report()
    assert report.top_concepts is report.concepts and report.top_tools is report.tools
    assert "authentication" in report.top_concepts
    assert report["top_concepts"] is report.concepts


def test_a_user_correction_is_felt_in_the_context_it_returns():
    events = []
    chetana = ChetanaController(None, lambda name, data: events.append((name, data)))
    before = chetana.before_turn("no, I meant the session tokens", correction=True)
    assert before.affect.frustration == 0.0
    context = chetana.after_user_correction()
    assert context.affect.frustration == pytest.approx(0.25)
    assert chetana.bhava.frustration == pytest.approx(0.25)
    chetana.after_tool_execution("edit", True, 30, "session tokens")  # the step ran: relief, no second count
    assert chetana.bhava.frustration == pytest.approx(0.20)
    for _ in range(2):
        chetana.after_user_correction()
    assert any(name == "frustrated" and data["tool"] == "user" for name, data in events)


def test_a_disabled_controller_feels_no_correction():
    chetana = ChetanaController({"enabled": False})
    assert chetana.after_user_correction().affect.frustration == 0.0


def test_a_result_content_is_read_only_while_an_intention_could_hold_it():
    with_content, without = ChetanaController(), ChetanaController()
    for chetana in (with_content, without):
        chetana.before_turn("How are you today?")
    assert not with_content.reads_results  # no goal: nothing a content holds can change
    with_content.after_tool_execution("reply", True, 5.0, '{"text": "I fix the parser before Friday"}')
    without.after_tool_execution("reply", True, 5.0, None)
    assert with_content.serialize() == without.serialize()
    for chetana in (with_content, without):
        chetana.before_turn("I need to fix the parser before Friday")
    assert with_content.reads_results and without.reads_results
    with_content.after_tool_execution("reply", True, 5.0, '{"text": "I fix the parser before Friday"}')
    without.after_tool_execution("reply", True, 5.0, None)
    progress = [c.serialize()["intentions"][0]["progress"] for c in (with_content, without)]
    assert progress[0] > progress[1] == 0.0  # once a goal reads results, the content moves it


def test_a_disabled_controller_reads_no_result():
    chetana = ChetanaController({"enabled": False})
    chetana.before_turn("I need to fix the parser before Friday")
    assert not chetana.reads_results
