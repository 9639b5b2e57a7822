"""The calibration window and concept extraction live in their own modules
(`calibration.py`, `concepts.py`); the names they took from `atma` and `dhyana` stay
importable from there as the very same objects, and the window behaves as the self-model's."""

import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.engines.chetana import (
    AtmaDarshana,
    ChetanaConfig,
    StateError,
    atma,
    calibration,
    concepts,
    dhyana,
    state,
)


@pytest.mark.parametrize(
    ("old_home", "new_home", "name"),
    [
        (atma, calibration, "CALIBRATION_CAP"),
        (dhyana, concepts, "CONCEPT_STOP_WORDS"),
        (dhyana, concepts, "MIN_CONCEPT_LENGTH"),
        (dhyana, concepts, "extract_concepts"),
    ],
)
def test_moved_names_are_re_exported_from_their_old_module(old_home, new_home, name):
    assert name in old_home.__all__
    assert getattr(old_home, name) is getattr(new_home, name)


def test_calibration_window_ratio_matches_the_self_model_over_a_sliding_window():
    window = calibration.CalibrationWindow(3)
    atma_ = AtmaDarshana(ChetanaConfig(calibration_window=3))
    calls = [(1.4, True), (0.9, False), (-0.2, False), (0.5, True), (0.8, False), (0.3, False)]
    for predicted, success in calls:
        ratio = window.add(predicted, success)
        atma_.record_tool_result("read", success, 1.0, predicted)
        assert ratio == atma_.calibration
    # the window keeps the last three pairs, clamped: (0.5, True), (0.8, False), (0.3, False)
    assert window.history() == [[0.5, True], [0.8, False], [0.3, False]]
    assert window.sum_actual == 1
    assert ratio == pytest.approx(1.6)


def test_calibration_window_with_no_success_is_one_or_the_cap():
    window = calibration.CalibrationWindow(2)
    assert window.add(0.0, False) == 1.0  # predicted failure, got failure
    assert window.add(0.7, False) == calibration.CALIBRATION_CAP  # overconfident, not Infinity


def test_calibration_window_restores_what_the_self_model_serialized():
    atma_ = AtmaDarshana(ChetanaConfig(calibration_window=4))
    for i in range(7):
        atma_.record_tool_result("edit", i % 3 != 0, 2.0, i / 7)
    state = json.loads(json.dumps(atma_.serialize()))
    window = calibration.CalibrationWindow(4)
    window.restore(state, "self_model")
    assert window.history() == state["calibration_history"]
    assert window.sum_predicted == state["calibration_sum"]
    with pytest.raises(StateError, match=r"self_model.calibration_history\[0\] must be a"):
        calibration.CalibrationWindow(4).restore({"calibration_history": [[0.5]]}, "self_model")


def test_concept_text_lowercases_and_keeps_only_letters_digits_and_spaces():
    assert concepts.concept_text("Auth-Token, v2!  über") == "authtoken v2  ber"
    assert concepts.concept_text("Plain ASCII: ok?") == "plain ascii ok"


def test_calibration_pairs_restore_alike_from_json_lists_and_from_tuples():
    # JSON's own lists of [float, bool] take a fast path (issue 26); it must clamp as the
    # checked path does, and anything else still goes through the checks that name it.
    history = [[1.5, True], [-0.25, False], [0.5, True], [1, False]]
    from_json = calibration.CalibrationWindow(8)
    from_json.restore({"calibration_history": history}, "self_model")
    from_tuples = calibration.CalibrationWindow(8)
    from_tuples.restore({"calibration_history": [tuple(p) for p in history]}, "self_model")
    assert from_json.history() == from_tuples.history() == [[1.0, True], [0.0, False], [0.5, True], [1.0, False]]
    assert from_json.sum_predicted == from_tuples.sum_predicted == 2.5
    for bad, what in (([float("nan"), True], "must be finite"), ([0.5, 1], "must be true or false"),
                      ([True, True], "must be a number")):
        with pytest.raises(StateError, match=rf"self_model.calibration_history\[1\] {what}"):
            calibration.CalibrationWindow(4).restore({"calibration_history": [[0.5, True], bad]}, "self_model")


_number = st.one_of(st.floats(), st.integers(-3, 3), st.booleans(), st.just(-0.0))


@settings(max_examples=300, deadline=None)
@given(st.lists(_number, max_size=12), st.sampled_from([(0.0, 1.0), (-1.0, 1.0), (0.0, math.inf)]))
def test_float_arrays_read_in_bulk_as_item_by_item(values, bounds):
    # `check_floats` checks a JSON array of plain floats in a few C passes (issue 26); what it
    # returns, or the error it raises, is what `check_float` gives item by item
    lo, hi = bounds

    def one_by_one():
        return [state.check_float(v, "x[]", lo, hi) for v in values]

    try:
        expected = one_by_one()
    except StateError as exc:
        with pytest.raises(StateError, match=re.escape(str(exc))):
            state.check_floats(values, "x[]", lo, hi)
        return
    assert state.check_floats(values, "x[]", lo, hi) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_number, st.one_of(st.booleans(), st.integers(0, 1))), max_size=10))
def test_calibration_history_restores_alike_by_column_and_pair_by_pair(history):
    # JSON lists take the column path; tuples, the pair-by-pair checks that name a bad item
    def restored(pairs):
        window = calibration.CalibrationWindow(6)
        try:
            window.restore({"calibration_history": pairs}, "self_model")
        except StateError as exc:
            return str(exc)
        return window.history(), window.sum_predicted, window.sum_actual

    assert restored([list(p) for p in history]) == restored([tuple(p) for p in history])
