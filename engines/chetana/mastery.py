"""Per-tool mastery for Atma-Darshana: the Wilson interval, trend constants, calibration
and velocity labels, and the record kept for each tool with its immutable snapshot."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from .errors import StateError
from .state import check_floats, check_map, read_float, read_int, read_list, read_str

__all__ = [
    "SLIGHT_MISCALIBRATION",
    "TRENDS",
    "TREND_LOOKBACK",
    "TREND_THRESHOLD",
    "WILSON_Z",
    "ToolMastery",
    "ToolRecord",
    "calibration_label",
    "velocity_label",
    "wilson_interval",
]

WILSON_Z = 1.96  # 95 % interval
TREND_LOOKBACK = 10  # invocations between the compared success rates
TREND_THRESHOLD = 0.05
SLIGHT_MISCALIBRATION = 0.1  # |calibration - 1| beyond this earns a "slightly" label
TRENDS = ("improving", "stable", "declining")


def wilson_interval(n: int, p: float) -> tuple[float, float]:
    """Wilson score interval (z = 1.96) for p successes-rate over n trials; [0, 1] at n = 0."""
    if n <= 0:
        return (0.0, 1.0)
    z2 = WILSON_Z * WILSON_Z
    denom = 1.0 + z2 / n
    centre = p + z2 / (2 * n)
    spread = WILSON_Z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return (max(0.0, (centre - spread) / denom), min(1.0, (centre + spread) / denom))


def calibration_label(calibration: float, tolerance: float = 0.3) -> str:
    """Name a calibration ratio: within 1 ± 0.1 well-calibrated, beyond 1 ± tolerance
    over/underconfident, between them "slightly" so."""
    if calibration > 1.0 + tolerance:
        return "overconfident"
    if calibration > 1.0 + SLIGHT_MISCALIBRATION:
        return "slightly overconfident"
    if calibration < 1.0 - tolerance:
        return "underconfident"
    if calibration < 1.0 - SLIGHT_MISCALIBRATION:
        return "slightly underconfident"
    return "well-calibrated"


def velocity_label(velocity: float) -> str:
    """improving / declining / steady, with a dead band of 0.001 per call."""
    return "improving" if velocity > 0.001 else "declining" if velocity < -0.001 else "steady"


class ToolMastery(NamedTuple):
    """A snapshot of what the agent knows about one tool."""

    success_rate: float
    avg_latency: float  # ms
    confidence_interval: tuple[float, float]  # Wilson 95 %
    last_improved: int  # tool-call number at which the trend last turned "improving"
    trend: str  # improving | stable | declining
    total_invocations: int
    successes: int


class ToolRecord:
    """Mutable per-tool statistics (snapshots are built only when someone asks)."""

    __slots__ = (
        "_ci",
        "_ci_total",
        "avg_latency",
        "error_at",
        "history",
        "last_improved",
        "rate",
        "streak",
        "successes",
        "total",
        "trend",
    )

    def __init__(self, created_at: int) -> None:
        self.total = 0
        self.successes = 0
        self.rate = 0.0
        self.avg_latency = 0.0
        self._ci = (0.0, 1.0)
        self._ci_total = 0  # the total the cached interval belongs to
        self.trend = "stable"
        self.last_improved = created_at
        self.history: deque[float] = deque(maxlen=TREND_LOOKBACK + 1)  # success rates
        self.streak = 0  # consecutive failures
        self.error_at = -1  # call number of the last failure not yet recovered from

    @property
    def ci(self) -> tuple[float, float]:
        """The Wilson interval, computed when read (most results are never looked at)."""
        if self._ci_total != self.total:
            self._ci = wilson_interval(self.total, self.rate)
            self._ci_total = self.total
        return self._ci

    def to_state(self) -> dict[str, Any]:
        """The record as JSON-safe data (the original's fields, then what trends and streaks
        need to continue)."""
        return {
            "success_rate": self.rate,
            "avg_latency": self.avg_latency,
            "confidence_interval": list(self.ci),
            "last_improved": self.last_improved,
            "trend": self.trend,
            "total_invocations": self.total,
            "successes": self.successes,
            "rate_history": list(self.history),
            "failure_streak": self.streak,
            "error_at": self.error_at,
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any], where: str) -> ToolRecord:
        """Restore from `to_state()` output; only the original's fields are required (a
        missing rate history is rebuilt flat, as the original did)."""
        check_map(data, where)
        total = read_int(data, "total_invocations", where)
        successes = read_int(data, "successes", where)
        if successes > total:
            raise StateError(f"{where}.successes ({successes}) exceeds total_invocations ({total})")
        record = cls(read_int(data, "last_improved", where, default=0))
        record.total, record.successes = total, successes
        record.rate = successes / total if total else 0.0
        record.avg_latency = read_float(data, "avg_latency", where, 0.0, math.inf)
        record.trend = read_str(data, "trend", where, TRENDS)
        default_history = [record.rate] * min(total, TREND_LOOKBACK + 1)
        history = read_list(data, "rate_history", where, default=default_history)
        at = f"{where}.rate_history[]"
        record.history.extend(check_floats(history, at, 0.0, 1.0))
        record.streak = read_int(data, "failure_streak", where, default=0)
        record.error_at = read_int(data, "error_at", where, lo=-1, default=-1)
        return record

    def snapshot(self) -> ToolMastery:
        """An immutable copy for readers."""
        return ToolMastery(
            self.rate,
            self.avg_latency,
            self.ci,
            self.last_improved,
            self.trend,
            self.total,
            self.successes,
        )
