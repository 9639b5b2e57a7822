"""Bhava (affect): increments, clamps, valence window, decay toward neutral, threshold
events on upward crossings, priors, and persistence."""

import json
import math

import pytest

from soul.engines.chetana import Affect, Bhava, ChetanaConfig, CognitivePriors, InputError


def recorder():
    events = []
    return events, lambda name, data: events.append((name, data))


def test_starts_neutral_with_the_default_base_arousal():
    assert Bhava().state == Affect(valence=0.0, arousal=0.3, confidence=0.5, frustration=0.0)


def test_an_error_adds_frustration_per_error():
    bhava = Bhava(ChetanaConfig())
    bhava.on_tool_result("grep", True, False)
    assert bhava.frustration == pytest.approx(0.15)


def test_a_success_relieves_frustration():
    bhava = Bhava()
    bhava.on_tool_result("grep", True)
    bhava.on_tool_result("grep", True)
    before = bhava.frustration
    bhava.on_tool_result("grep", False)
    assert bhava.frustration == pytest.approx(before - 0.05)


def test_a_correction_weighs_more_than_an_error():
    bhava = Bhava()
    bhava.on_tool_result("edit", False, True)
    assert bhava.frustration == pytest.approx(0.25)
    assert bhava.frustration > ChetanaConfig().frustration_per_error


def test_frustration_stays_in_unit_interval():
    bhava = Bhava()
    for _ in range(50):
        bhava.on_tool_result("bash", True, True)
    assert bhava.frustration == 1.0
    for _ in range(50):
        bhava.on_tool_result("bash", False)
    assert bhava.frustration == 0.0


def test_frustrated_fires_once_when_frustration_rises_through_the_threshold():
    events, on_event = recorder()
    bhava = Bhava(on_event=on_event)
    for _ in range(10):  # 0.15 per error: crosses 0.7 on the 5th, stays above after
        bhava.on_tool_result("bash", True)
    frustrated = [data for name, data in events if name == "frustrated"]
    assert len(frustrated) == 1
    assert frustrated[0]["frustration"] >= 0.7


def test_frustrated_fires_again_only_after_falling_below_and_crossing_again():
    events, on_event = recorder()
    bhava = Bhava(on_event=on_event)
    for _ in range(5):
        bhava.on_tool_result("bash", True)
    for _ in range(5):
        bhava.on_tool_result("bash", False)  # back under the threshold (0.5)
    bhava.on_tool_result("bash", True)
    bhava.on_tool_result("bash", True)
    assert [name for name, _ in events].count("frustrated") == 2


def test_an_error_spikes_arousal():
    bhava = Bhava()
    bhava.on_tool_result("grep", True)
    assert bhava.arousal == pytest.approx(0.5)


def test_a_sub_agent_spawn_spikes_arousal():
    bhava = Bhava()
    bhava.on_sub_agent_spawn()
    assert bhava.arousal == pytest.approx(0.4)


def test_valence_is_success_minus_failure_ratio_over_the_last_20_outcomes():
    bhava = Bhava()
    for _ in range(10):
        bhava.on_tool_result("read", False)
    assert bhava.valence == 1.0
    for _ in range(5):
        bhava.on_tool_result("bash", True)
    assert bhava.valence == pytest.approx((10 - 5) / 15)
    for _ in range(20):
        bhava.on_tool_result("bash", True)  # the window forgets the successes
    assert bhava.valence == -1.0


def test_all_failures_give_negative_valence():
    bhava = Bhava()
    for _ in range(10):
        bhava.on_tool_result("bash", True)
    assert bhava.valence < 0


def test_decay_moves_every_dimension_but_confidence_toward_neutral():
    bhava = Bhava()
    for _ in range(5):
        bhava.on_tool_result("bash", True)
    bhava.update_confidence(0.9)
    high = bhava.state
    for _ in range(200):
        bhava.decay_turn()
    decayed = bhava.state
    assert decayed.frustration < high.frustration
    assert decayed.arousal == pytest.approx(0.3, abs=0.05)
    assert decayed.valence == pytest.approx(0.0, abs=0.05)
    assert decayed.confidence == 0.9  # capability, not mood


def test_decay_uses_the_configured_rate_exactly():
    bhava = Bhava(ChetanaConfig(affect_decay_rate=0.5))
    bhava.on_tool_result("bash", True)  # frustration .15, arousal .5, valence -1
    bhava.decay_turn()
    assert bhava.state == pytest.approx((-0.5, 0.4, 0.5, 0.075))


def test_update_confidence_sets_and_clamps():
    bhava = Bhava()
    bhava.update_confidence(0.9)
    assert bhava.confidence == pytest.approx(0.9)
    bhava.update_confidence(7)
    assert bhava.confidence == 1.0
    bhava.update_confidence(-math.inf)
    assert bhava.confidence == 0.0


def test_update_confidence_rejects_nan_and_non_numbers():
    bhava = Bhava()
    with pytest.raises(InputError):
        bhava.update_confidence(math.nan)
    with pytest.raises(InputError):
        bhava.update_confidence("high")  # type: ignore[arg-type]
    assert bhava.confidence == 0.5


def test_confident_fires_on_the_upward_crossing_only():
    events, on_event = recorder()
    bhava = Bhava(on_event=on_event)
    bhava.update_confidence(0.85)
    bhava.update_confidence(0.95)  # still above: no new event
    bhava.update_confidence(0.5)
    bhava.update_confidence(0.8)  # crosses again (>= threshold)
    assert events == [("confident", {"confidence": 0.85}), ("confident", {"confidence": 0.8})]


def test_base_arousal_prior_sets_start_and_equilibrium():
    bhava = Bhava(priors=CognitivePriors(base_arousal=0.6))
    assert bhava.arousal == 0.6
    bhava.on_tool_result("bash", True)
    for _ in range(500):
        bhava.decay_turn()
    assert bhava.arousal == pytest.approx(0.6, abs=1e-3)


def test_emotional_reactivity_scales_the_rises_not_the_relief():
    calm = Bhava(priors=CognitivePriors(emotional_reactivity=0.0))
    hot = Bhava(priors=CognitivePriors(emotional_reactivity=1.0))
    for bhava in (calm, hot):
        bhava.on_tool_result("bash", True)
    assert calm.frustration == pytest.approx(0.075)
    assert hot.frustration == pytest.approx(0.225)
    assert calm.arousal == pytest.approx(0.4) and hot.arousal == pytest.approx(0.6)
    hot.on_tool_result("bash", False)
    assert hot.frustration == pytest.approx(0.175)


def test_serialize_round_trips_through_json_with_the_valence_window():
    bhava = Bhava()
    bhava.on_tool_result("grep", True)
    bhava.on_tool_result("read", False)
    state = json.loads(json.dumps(bhava.serialize()))
    restored = Bhava.deserialize(state, ChetanaConfig())
    assert restored.state == bhava.state
    assert restored.serialize() == bhava.serialize()
    restored.on_tool_result("read", False)
    bhava.on_tool_result("read", False)
    assert restored.valence == bhava.valence  # the window came back too


def test_a_state_without_the_window_restores_like_the_original():
    restored = Bhava.deserialize(
        {"valence": 0.2, "arousal": 0.4, "confidence": 0.6, "frustration": 0.1}
    )
    assert restored.state == Affect(0.2, 0.4, 0.6, 0.1)
