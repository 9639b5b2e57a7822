"""Calibration for Atma-Darshana: how predicted success compares with actual success, as the
ratio of their sums over a sliding window of (predicted, actual) pairs, capped so that JSON
can hold it; with the window's own persistence."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from .errors import StateError
from .state import check_bool, check_float, plain_floats, read_float, read_list

__all__ = ["CALIBRATION_CAP", "CalibrationWindow"]

# The original divides by a zero actual success rate and reports Infinity, which JSON cannot
# hold; a ratio this high already means "overconfident", so it is the ceiling.
CALIBRATION_CAP = 10.0

_LIST_ONLY, _PAIR, _BOOL_ONLY = {list}, {2}, {bool}


class CalibrationWindow:
    """The last `size` (predicted, actual) pairs with running sums of both sides.

    `add` records one pair and returns the new calibration ratio: mean predicted over mean
    actual (1.0 is well calibrated, above it overconfident), in [0, CALIBRATION_CAP].
    """

    __slots__ = ("pairs", "sum_actual", "sum_predicted")

    def __init__(self, size: int) -> None:
        self.pairs: deque[tuple[float, bool]] = deque(maxlen=size)
        self.sum_predicted = 0.0
        self.sum_actual = 0

    def add(self, predicted_success: float, success: bool) -> float:
        """Record a prediction (clamped to [0, 1]) and whether the call succeeded; the oldest
        pair leaves a full window. Returns the calibration ratio over the window."""
        predicted = (
            0.0
            if predicted_success < 0.0
            else 1.0
            if predicted_success > 1.0
            else float(predicted_success)
        )
        pairs = self.pairs
        if len(pairs) == pairs.maxlen:
            old_predicted, old_actual = pairs[0]
            self.sum_predicted -= old_predicted
            self.sum_actual -= old_actual
        pairs.append((predicted, success))
        self.sum_predicted += predicted
        self.sum_actual += success
        # The ratio inline: this runs on every tool result the controller records.
        predicted_sum, actual = self.sum_predicted, self.sum_actual
        if actual == 0:
            # No success in the window: predicting failure was right, predicting success is
            # overconfidence, capped instead of the original's Infinity.
            return 1.0 if predicted_sum <= 1e-12 else CALIBRATION_CAP
        return min(CALIBRATION_CAP, max(0.0, predicted_sum) / actual)  # mean/mean = sum/sum

    def history(self) -> list[list[float | bool]]:
        """The window as JSON-safe [predicted, actual] pairs, oldest first."""
        return [[p, a] for p, a in self.pairs]

    def restore(self, state: Mapping[str, Any], path: str) -> None:
        """Refill the window from a serialized self-model's `calibration_history` and
        `calibration_sum` (both optional: an absent history is an empty window)."""
        pairs = self.pairs
        history = read_list(state, "calibration_history", path, default=[])
        if type(history) is list and history and set(map(type, history)) == _LIST_ONLY and set(map(len, history)) == _PAIR:
            # as JSON gives it: [float, bool] pairs, checked column by column in C
            column, outcomes = zip(*history, strict=True)
            if set(map(type, outcomes)) == _BOOL_ONLY and plain_floats(list(column), 0.0, 1.0):
                pairs.extend(zip(column, outcomes, strict=True))
                history = ()
        for i, pair in enumerate(history):
            if type(pair) is list and len(pair) == 2:  # as JSON gives it: checked without naming it
                predicted, actual = pair
                if type(predicted) is float and type(actual) is bool and math.isfinite(predicted):
                    pairs.append((min(1.0, max(0.0, predicted)), actual))
                    continue
            where = f"{path}.calibration_history[{i}]"
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise StateError(f"{where} must be a [predicted, actual] pair")
            pairs.append((check_float(pair[0], where, 0.0, 1.0), check_bool(pair[1], where)))
        exact = math.fsum(map(itemgetter(0), pairs))
        stored = read_float(state, "calibration_sum", path, 0.0, math.inf, default=exact)
        # The running sum carries the live instance's rounding; keep it unless it is not a
        # sum of this window at all (a hand-edited state).
        self.sum_predicted = stored if abs(stored - exact) < 1e-6 else exact
        self.sum_actual = sum(map(itemgetter(1), pairs))
