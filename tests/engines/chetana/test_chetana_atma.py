"""Atma-Darshana (self-model): mastery, Wilson intervals, trends, calibration (finite),
velocity, style fingerprint (real turns), limitations (once per streak), self-assessment."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.engines.chetana import AtmaDarshana, ChetanaConfig, InputError, wilson_interval
from soul.engines.chetana.atma import CALIBRATION_CAP, CONTEXT_LOSS
from soul.engines.chetana.mastery import calibration_label


def recorder():
    events = []
    return events, lambda name, data: events.append((name, data))


def test_starts_with_an_empty_well_calibrated_model():
    model = AtmaDarshana(ChetanaConfig()).get_model()
    assert model.tool_mastery == {} and model.known_limitations == []
    assert model.calibration == 1.0 and model.learning_velocity == 0.0
    assert model.style_fingerprint == {
        "exploration_vs_exploitation": 0.5,
        "tool_density": 0.0,
        "error_recovery_speed": 1.0,
    }


def test_a_success_is_recorded_in_mastery():
    atma = AtmaDarshana()
    atma.record_tool_result("grep", True, 50)
    grep = atma.get_model().tool_mastery["grep"]
    assert (grep.success_rate, grep.total_invocations, grep.successes) == (1.0, 1, 1)


def test_a_failure_is_recorded_in_mastery():
    atma = AtmaDarshana()
    atma.record_tool_result("bash", False, 100)
    bash = atma.get_model().tool_mastery["bash"]
    assert (bash.success_rate, bash.total_invocations, bash.successes) == (0.0, 1, 0)


def test_wilson_interval_matches_the_formula_for_20_of_25():
    n, p, z = 25, 0.8, 1.96
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    expected = ((centre - spread) / (1 + z * z / n), (centre + spread) / (1 + z * z / n))
    assert wilson_interval(n, p) == pytest.approx(expected)
    atma = AtmaDarshana()
    for _ in range(20):
        atma.record_tool_result("grep", True, 50)
    for _ in range(5):
        atma.record_tool_result("grep", False, 100)
    low, high = atma.get_model().tool_mastery["grep"].confidence_interval
    assert 0 < low < 0.8 < high <= 1
    assert (low, high) == pytest.approx(expected)
    assert (round(low, 3), round(high, 3)) == (0.609, 0.911)


def test_wilson_interval_with_no_trials_is_the_whole_range():
    assert wilson_interval(0, 0.0) == (0.0, 1.0)


def test_trend_is_improving_when_the_rate_rose_over_the_last_ten_calls():
    atma = AtmaDarshana()
    for _ in range(5):
        atma.record_tool_result("edit", False, 50)
    for _ in range(15):
        atma.record_tool_result("edit", True, 50)
    assert atma.get_model().tool_mastery["edit"].trend == "improving"


def test_trend_is_declining_when_the_rate_fell():
    atma = AtmaDarshana()
    for _ in range(15):
        atma.record_tool_result("bash", True, 50)
    for _ in range(5):
        atma.record_tool_result("bash", False, 50)
    assert atma.get_model().tool_mastery["bash"].trend == "declining"


def test_trend_is_stable_until_there_are_more_than_ten_calls():
    atma = AtmaDarshana()
    for _ in range(5):
        atma.record_tool_result("edit", False, 50)
    for _ in range(5):
        atma.record_tool_result("edit", True, 50)
    assert atma.get_model().tool_mastery["edit"].trend == "stable"


def test_last_improved_is_the_call_number_of_the_turn_to_improving():
    atma = AtmaDarshana()
    for _ in range(5):
        atma.record_tool_result("edit", False, 50)
    for _ in range(15):
        atma.record_tool_result("edit", True, 50)
    assert atma.get_model().tool_mastery["edit"].last_improved == 11


def test_average_latency_is_the_running_mean():
    atma = AtmaDarshana()
    for latency in (100, 200, 300):
        atma.record_tool_result("grep", True, latency)
    assert atma.get_model().tool_mastery["grep"].avg_latency == pytest.approx(200)


def test_calibration_is_mean_prediction_over_mean_success():
    atma = AtmaDarshana()
    for i in range(20):
        atma.record_tool_result("edit", i % 2 == 0, 50, 0.9)
    assert atma.calibration == pytest.approx(1.8)
    assert calibration_label(atma.calibration) == "overconfident"


def test_calibration_with_no_success_is_a_finite_overconfident_cap():
    # The original returned Infinity here, which JSON cannot hold.
    atma = AtmaDarshana()
    for _ in range(3):
        atma.record_tool_result("edit", False, 50, 0.9)
    assert atma.calibration == CALIBRATION_CAP
    assert math.isfinite(atma.calibration)
    assert atma.get_self_assessment().startswith("overconfident (10.00)")
    json.dumps(atma.serialize(), allow_nan=False)


def test_predicting_failure_and_failing_is_well_calibrated():
    atma = AtmaDarshana()
    for _ in range(3):
        atma.record_tool_result("edit", False, 50, 0.0)
    assert atma.calibration == 1.0


def test_calibration_window_forgets_old_pairs():
    atma = AtmaDarshana(ChetanaConfig(calibration_window=4))
    for _ in range(4):
        atma.record_tool_result("edit", True, 1, 0.5)
    assert atma.calibration == pytest.approx(0.5)
    for _ in range(4):
        atma.record_tool_result("edit", True, 1, 1.0)
    assert atma.calibration == pytest.approx(1.0)


def test_without_a_prediction_calibration_does_not_move():
    atma = AtmaDarshana()
    atma.record_tool_result("edit", False, 50)
    assert atma.calibration == 1.0


def test_learning_velocity_is_positive_after_improving():
    atma = AtmaDarshana()
    for _ in range(12):
        atma.record_tool_result("grep", False, 50)
    for _ in range(12):
        atma.record_tool_result("grep", True, 50)
    # 12/24 now against 2/14 ten calls ago, over ten calls.
    assert atma.learning_velocity == pytest.approx((12 / 24 - 2 / 14) / 10)


def test_learning_velocity_ignores_tools_without_ten_calls_of_history():
    # The original averaged every tool now against only the long-lived ones then.
    atma = AtmaDarshana()
    for _ in range(11):
        atma.record_tool_result("grep", True, 5)
    atma.record_tool_result("fresh", False, 5)
    assert atma.learning_velocity == 0.0


def test_a_disabled_tool_becomes_a_limitation():
    atma = AtmaDarshana()
    atma.mark_tool_disabled("bash", "sandbox restriction")
    assert atma.known_limitations == ["Tool bash unreliable: sandbox restriction"]


def test_context_recovery_becomes_a_limitation():
    atma = AtmaDarshana()
    atma.mark_context_recovery()
    assert atma.known_limitations == [CONTEXT_LOSS]
    assert "Context loss" in atma.known_limitations[0]


def test_limitations_are_capped_dropping_the_oldest():
    atma = AtmaDarshana()
    for i in range(30):
        atma.mark_tool_disabled(f"tool-{i}", f"reason-{i}")
    assert len(atma.known_limitations) == 20
    assert atma.known_limitations[0] == "Tool tool-10 unreliable: reason-10"


def test_limitations_are_deduplicated():
    atma = AtmaDarshana()
    atma.mark_tool_disabled("bash", "sandbox restriction")
    atma.mark_tool_disabled("bash", "sandbox restriction")
    assert len(atma.known_limitations) == 1


def test_three_consecutive_failures_add_one_limitation_per_streak():
    # The original added "3 consecutive failures", "4 ...", "5 ..." for one streak.
    atma = AtmaDarshana()
    for _ in range(6):
        atma.record_tool_result("bash", False, 10)
    assert atma.known_limitations == ["Tool bash unreliable: 3 consecutive failures"]
    atma.record_tool_result("bash", True, 10)
    atma.record_tool_result("bash", False, 10)
    assert len(atma.known_limitations) == 1


def test_two_failures_are_not_yet_a_limitation():
    atma = AtmaDarshana()
    atma.record_tool_result("bash", False, 10)
    atma.record_tool_result("bash", False, 10)
    assert atma.known_limitations == []


def test_style_fingerprint_has_the_three_dimensions_in_range():
    atma = AtmaDarshana()
    atma.record_tool_result("grep", True, 50)
    style = atma.get_model().style_fingerprint
    assert set(style) == {"exploration_vs_exploitation", "tool_density", "error_recovery_speed"}
    assert all(0.0 <= v <= 1.0 for v in style.values())


def test_tool_density_counts_real_turns():
    # The original counted calls as turns, so density was always 1 - 1/2 = 0.5.
    atma = AtmaDarshana()
    for _ in range(3):
        atma.record_tool_result("read", True, 1)
    assert atma.style_fingerprint["tool_density"] == pytest.approx(0.75)  # 3 in one turn
    atma.end_turn()
    atma.end_turn()  # an empty turn lowers the density
    assert atma.style_fingerprint["tool_density"] == pytest.approx(1 - 1 / (1 + 3 / 2))


def test_exploration_is_unique_tools_over_calls():
    atma = AtmaDarshana()
    for tool in ("read", "read", "edit", "read"):
        atma.record_tool_result(tool, True, 1)
    assert atma.style_fingerprint["exploration_vs_exploitation"] == pytest.approx(0.5)


def test_error_recovery_speed_counts_calls_from_failure_to_recovery():
    atma = AtmaDarshana()
    atma.record_tool_result("bash", False, 1)
    atma.record_tool_result("read", True, 1)
    atma.record_tool_result("bash", True, 1)  # two calls after the failure
    assert atma.style_fingerprint["error_recovery_speed"] == pytest.approx(1 / 3)


def test_self_updated_fires_after_every_recorded_result():
    events, on_event = recorder()
    atma = AtmaDarshana(on_event=on_event)
    atma.record_tool_result("grep", True, 5)
    atma.record_tool_result("bash", False, 5)
    assert [name for name, _ in events] == ["self_updated", "self_updated"]
    assert events[1][1] == {"tool": "bash", "calibration": 1.0, "velocity": 0.0, "top_tool": "grep"}


def test_self_assessment_is_short_and_names_strong_and_weak_tools():
    atma = AtmaDarshana()
    atma.record_tool_result("grep", True, 50)
    atma.record_tool_result("read", False, 100)
    atma.mark_context_recovery()
    text = atma.get_self_assessment()
    assert text == (
        "well-calibrated (1.00), steady (v:+0.000). Strong: grep (100%)."
        " Weak: read (0%). 1 limitation noted."
    )


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["grep", "read", "bash", "edit", "web"]), st.booleans()), max_size=40))
def test_self_assessment_never_lists_a_tool_as_both_strong_and_weak(results: list[tuple[str, bool]]) -> None:
    atma = AtmaDarshana()
    for tool, ok in results:
        atma.record_tool_result(tool, ok, 5)
    text = atma.get_self_assessment()
    strong = text.split(" Strong: ")[1].split(".")[0] if " Strong: " in text else ""
    weak = text.split(" Weak: ")[1].split(" (")[0] if " Weak: " in text else None
    assert weak is None or f"{weak} (" not in strong


def test_self_assessment_stays_under_200_characters():
    atma = AtmaDarshana()
    for i in range(10):
        atma.record_tool_result(f"a_rather_long_tool_name_number_{i}", i % 2 == 0, 5)
    assert len(atma.get_self_assessment()) < 200


def test_self_assessment_follows_changes():
    atma = AtmaDarshana()
    atma.record_tool_result("grep", True, 5)
    first = atma.get_self_assessment()
    atma.mark_tool_disabled("bash", "gone")
    assert atma.get_self_assessment() != first


def test_negative_or_nan_latency_is_rejected():
    atma = AtmaDarshana()
    for bad in (-1, math.nan, math.inf, "5"):
        with pytest.raises(InputError):
            atma.record_tool_result("grep", True, bad)
    assert atma.get_model().tool_mastery == {}


def test_serialize_round_trips_and_continues_identically():
    atma = AtmaDarshana()
    for i in range(14):
        atma.record_tool_result("grep", i % 3 != 0, 50 + i, 0.7)
    atma.record_tool_result("read", False, 100)
    atma.mark_tool_disabled("bash", "sandbox")
    atma.end_turn()
    state = json.loads(json.dumps(atma.serialize()))
    restored = AtmaDarshana.deserialize(state, ChetanaConfig())
    assert restored.serialize() == atma.serialize()
    model = restored.get_model()
    assert model.tool_mastery["grep"] == atma.get_model().tool_mastery["grep"]
    assert "Tool bash unreliable: sandbox" in model.known_limitations
    for system in (atma, restored):
        system.record_tool_result("grep", False, 3, 0.9)
    assert restored.serialize() == atma.serialize()


def test_an_original_style_state_restores_with_rebuilt_histories():
    state = {
        "tool_mastery": {
            "grep": {
                "success_rate": 1.0,
                "avg_latency": 50.0,
                "confidence_interval": [0.2, 1.0],
                "last_improved": 0,
                "trend": "stable",
                "total_invocations": 2,
                "successes": 2,
            }
        },
        "known_limitations": [],
        "calibration": 1.0,
        "learning_velocity": 0.0,
        "style_fingerprint": {"tool_density": 0.5},
    }
    restored = AtmaDarshana.deserialize(state)
    assert restored.get_model().tool_mastery["grep"].successes == 2
    assert restored.get_model().tool_mastery["grep"].confidence_interval == wilson_interval(2, 1.0)


def test_a_bad_prediction_is_rejected_before_any_change():
    atma = AtmaDarshana()
    for bad in (math.nan, "0.5", True):
        with pytest.raises(InputError):
            atma.record_tool_result("grep", True, 5, bad)
    assert atma.get_model().tool_mastery == {}
