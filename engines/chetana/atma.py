"""Atma-Darshana (self-model): per-tool mastery with Wilson intervals and trends,
calibration of predicted against actual success, learning velocity, a behavioural style
fingerprint, known limitations and a short self-assessment. The calibration window itself
is `calibration.CalibrationWindow`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from .calibration import CALIBRATION_CAP, CalibrationWindow
from .config import (
    SYSTEM_MAX_CALIBRATION_WINDOW,
    SYSTEM_MAX_LIMITATIONS,
    ConfigLike,
    PriorsLike,
)
from .errors import InputError
from .events import SELF_UPDATED, EventCallback
from .mastery import (
    TREND_LOOKBACK,
    TREND_THRESHOLD,
    ToolMastery,
    ToolRecord,
    calibration_label,
    velocity_label,
)
from .pending import NO_GATE
from .state import check_float, check_map, check_str, read_float, read_int, read_list, read_map
from .subsystem import Subsystem

__all__ = [
    "CALIBRATION_CAP",
    "FAILURE_STREAK_LIMIT",
    "AtmaDarshana",
    "SelfModel",
]

FAILURE_STREAK_LIMIT = 3  # consecutive failures that make a tool a known limitation
WEAK_RATE = 0.7  # success rate under which the self-assessment calls a tool weak, never strong
CONTEXT_LOSS = "Context loss detected — may lose track of earlier conversation"


def _is_number(value: object) -> bool:
    # The exact-type test is the fast path; bool is an int but never a latency.
    kind = type(value)
    if kind is float or kind is int:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool)


class SelfModel(NamedTuple):
    """A snapshot of the whole self-model."""

    tool_mastery: dict[str, ToolMastery]
    known_limitations: list[str]
    calibration: float
    learning_velocity: float
    style_fingerprint: dict[str, float]


class AtmaDarshana(Subsystem):
    """The self-model: records every tool result and keeps statistics about itself.

    Fires `self_updated` after every recorded tool result (as the original does).
    """

    __slots__ = (
        "_assessment",
        "_assessment_key",
        "_assessment_text",
        "_cal",
        "_calls_this_turn",
        "_gate",
        "_recovery_count",
        "_recovery_total",
        "_style",
        "_style_stale",
        "_tools",
        "_total_calls",
        "_turns",
        "_velocity",
        "_velocity_stale",
        "calibration",
        "known_limitations",
        "on_event",
    )

    def _start(self) -> None:
        self._gate = NO_GATE  # the controller's gate when it runs this subsystem
        self._tools: dict[str, ToolRecord] = {}
        self.known_limitations: list[str] = []
        self.calibration = 1.0
        # Velocity and style wait for their next read (each alone: a self_updated event
        # reads the velocity after every tool result, the style is rarely read).
        self._velocity_stale = False
        self._style_stale = False
        self._velocity = 0.0
        self._style: dict[str, float] = {
            "exploration_vs_exploitation": 0.5,
            "tool_density": 0.0,
            "error_recovery_speed": 1.0,
        }
        window = min(self.config.calibration_window, SYSTEM_MAX_CALIBRATION_WINDOW)
        self._cal = CalibrationWindow(window)
        self._total_calls = 0
        self._turns = 0  # completed turns (end_turn calls)
        self._calls_this_turn = 0
        self._recovery_total = 0  # calls between a failure and the recovering success
        self._recovery_count = 0
        self._assessment: str | None = None  # valid until the next change
        self._assessment_text: str | None = None  # last built text and what it printed
        self._assessment_key: tuple[Any, ...] = ()

    # --- recording ---------------------------------------------------------------------

    def success_rate(self, tool: str) -> float | None:
        """The tool's current success rate, or None if it was never used."""
        record = self._tools.get(tool)
        return record.rate if record is not None else None

    def record_tool_result(
        self, tool: str, success: bool, latency_ms: float, predicted_success: float | None = None
    ) -> None:
        """Record one tool execution: mastery, Wilson interval, trend, calibration (when a
        prediction is given), failure streak, recovery, learning velocity and style."""
        if not _is_number(latency_ms) or not 0.0 <= latency_ms < math.inf:
            raise InputError(f"latency_ms must be a finite number >= 0, got {latency_ms!r}")
        # Checked before any change, so a bad call leaves no trace.
        if predicted_success is not None and (
            not _is_number(predicted_success) or predicted_success != predicted_success
        ):
            raise InputError(
                f"predicted_success must be a number in [0, 1], got {predicted_success!r}"
            )
        self._record(tool, success, latency_ms, predicted_success)

    def _record(
        self, tool: str, success: bool, latency_ms: float, predicted_success: float | None
    ) -> None:
        # record_tool_result past its checks (the controller has made them already).
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        self._total_calls += 1
        self._calls_this_turn += 1
        call = self._total_calls
        record = self._tools.get(tool)
        if record is None:
            record = self._tools[tool] = ToolRecord(call)

        record.total = total = record.total + 1
        if success:
            record.successes += 1
        rate = record.rate = record.successes / total
        record.avg_latency += (latency_ms - record.avg_latency) / total

        history = record.history
        history.append(rate)
        if len(history) > TREND_LOOKBACK:
            delta = rate - history[0]  # the rate TREND_LOOKBACK invocations ago
            trend = (
                "improving"
                if delta > TREND_THRESHOLD
                else "declining"
                if delta < -TREND_THRESHOLD
                else "stable"
            )
            if trend == "improving" and record.trend != "improving":
                record.last_improved = call
            record.trend = trend

        if predicted_success is not None:  # calibration over the last N (predicted, actual)
            self.calibration = self._cal.add(predicted_success, success)

        if success:
            record.streak = 0
            if record.error_at >= 0:
                self._recovery_total += call - record.error_at
                self._recovery_count += 1
                record.error_at = -1
        else:
            record.streak += 1
            record.error_at = call
            # Once per streak: the original re-added "N consecutive failures" for every N >= 3.
            if record.streak == FAILURE_STREAK_LIMIT:
                self.add_limitation(
                    f"Tool {tool} unreliable: {FAILURE_STREAK_LIMIT} consecutive failures"
                )

        # Velocity and style are functions of the counts: settled when read, not per call.
        self._velocity_stale = self._style_stale = True
        self._assessment = None
        if self.on_event is not None:
            self.on_event(
                SELF_UPDATED,
                {
                    "tool": tool,
                    "calibration": self.calibration,
                    "velocity": self.learning_velocity,
                    "top_tool": self.top_tool(),
                },
            )

    @property
    def learning_velocity(self) -> float:
        """Change of the mean success rate per call over the last ten calls of each tool."""
        if self._velocity_stale:
            self._velocity_stale = False
            self._recompute_velocity()
        return self._velocity

    @property
    def style_fingerprint(self) -> dict[str, float]:
        """exploration_vs_exploitation, tool_density, error_recovery_speed, each in [0, 1]."""
        if self._style_stale:
            self._style_stale = False
            self._recompute_style()
        return self._style

    def _recompute_velocity(self) -> None:
        # Only tools with TREND_LOOKBACK calls of history take part, on both sides of the
        # difference (the original averaged all tools now against only those tools then).
        now = then = 0.0
        count = 0
        for record in self._tools.values():
            if len(record.history) > TREND_LOOKBACK:
                now += record.rate
                then += record.history[0]
                count += 1
        self._velocity = (now - then) / count / TREND_LOOKBACK if count else 0.0

    def _recompute_style(self) -> None:
        fp = self._style
        calls = self._total_calls
        if calls:
            fp["exploration_vs_exploitation"] = min(1.0, len(self._tools) / calls)
            # Real turns, counting the one in progress (the original counted tool calls as
            # turns, so tool_density was always 0.5).
            turns = self._turns + (1 if self._calls_this_turn else 0)
            if turns:
                fp["tool_density"] = 1.0 - 1.0 / (1.0 + calls / turns)
        if self._recovery_count:
            fp["error_recovery_speed"] = 1.0 / (1.0 + self._recovery_total / self._recovery_count)

    def end_turn(self) -> None:
        """A turn ended: tool density is tools per real turn, so the turn count moves here."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        self._turns += 1
        self._calls_this_turn = 0
        self._velocity_stale = self._style_stale = True

    # --- limitations -------------------------------------------------------------------

    def add_limitation(self, limitation: str) -> None:
        """Remember a limitation once; past the cap the oldest is forgotten."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        if limitation in self.known_limitations:
            return
        self.known_limitations.append(limitation)
        cap = min(self.config.max_limitations, SYSTEM_MAX_LIMITATIONS)
        if len(self.known_limitations) > cap:
            del self.known_limitations[: len(self.known_limitations) - cap]
        self._assessment = None

    def mark_tool_disabled(self, tool: str, reason: str) -> None:
        """The host disabled a tool: "Tool <tool> unreliable: <reason>"."""
        self.add_limitation(f"Tool {tool} unreliable: {reason}")

    def mark_context_recovery(self) -> None:
        """The host had to recover lost context: a standing limitation."""
        self.add_limitation(CONTEXT_LOSS)

    # --- reading -----------------------------------------------------------------------

    def top_tool(self) -> str | None:
        """The tool with the highest success rate (first used wins a tie), or None."""
        best, best_rate = None, -1.0
        for name, record in self._tools.items():
            if record.rate > best_rate:
                best, best_rate = name, record.rate
        return best

    def mastery(self) -> dict[str, ToolMastery]:
        """Snapshots of every tool's mastery, in order of first use."""
        return {name: record.snapshot() for name, record in self._tools.items()}

    def ranked_tools(self, n: int | None = None) -> list[tuple[str, ToolMastery]]:
        """Tools by success rate, highest first (ties: first used first)."""
        ranked = sorted(self._tools.items(), key=lambda item: item[1].rate, reverse=True)
        return [(name, record.snapshot()) for name, record in ranked[:n]]

    def get_model(self) -> SelfModel:
        """A snapshot of the whole self-model."""
        return SelfModel(
            self.mastery(),
            list(self.known_limitations),
            self.calibration,
            self.learning_velocity,
            dict(self.style_fingerprint),
        )

    @property
    def calibration_tolerance(self) -> float:
        """Half-width of the well-calibrated band (0.3 unless self-awareness is tuned)."""
        return self.priors.calibration_tolerance

    def get_self_assessment(self) -> str:
        """A summary under 200 characters for a system prompt: calibration, velocity, the
        strongest tools (at least 70 %), the weakest tool under 70 % and how many limitations are known."""
        if self._assessment is not None:
            return self._assessment
        cal, vel = self.calibration, self.learning_velocity
        ranked = sorted(self._tools.items(), key=lambda item: item[1].rate, reverse=True)
        # One line per tool: a tool under WEAK_RATE is never "strong", however few tools there
        # are (with two tools, the one that always failed was listed under both).
        strong = [(n, round(r.rate * 100)) for n, r in ranked if r.rate >= WEAK_RATE][:3]
        weak = [(n, round(r.rate * 100)) for n, r in ranked if r.rate < WEAK_RATE and r.total > 0][-1:]
        count = len(self.known_limitations)
        # The text changes far less often than the numbers behind it: rebuild it only when
        # what it prints changes.
        key = (f"{cal:.2f}", f"{vel:+.3f}", strong, weak, count)
        if key == self._assessment_key and self._assessment_text is not None:
            self._assessment = self._assessment_text
            return self._assessment_text
        text = (
            f"{calibration_label(cal, self.calibration_tolerance)} ({key[0]}), "
            f"{velocity_label(vel)} (v:{key[1]})."
        )
        if strong:
            text += " Strong: " + ", ".join(f"{n} ({pct}%)" for n, pct in strong) + "."
        if weak:
            text += f" Weak: {weak[0][0]} ({weak[0][1]}%)."
        if count:
            text += f" {count} limitation{'s' if count > 1 else ''} noted."
        if len(text) >= 200:
            text = text[:196] + "..."
        self._assessment = self._assessment_text = text
        self._assessment_key = key
        return text

    # --- persistence -------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        """The self-model plus what it needs to continue exactly where it stopped (rate
        histories, streaks, the calibration window), as a JSON-safe dict."""
        return {
            "tool_mastery": {name: r.to_state() for name, r in self._tools.items()},
            "known_limitations": list(self.known_limitations),
            "calibration": self.calibration,
            "learning_velocity": self.learning_velocity,
            "style_fingerprint": dict(self.style_fingerprint),
            "calibration_history": self._cal.history(),
            "calibration_sum": self._cal.sum_predicted,
            "total_calls": self._total_calls,
            "turns": self._turns,
            "calls_this_turn": self._calls_this_turn,
            "recovery_total": self._recovery_total,
            "recovery_count": self._recovery_count,
        }

    @classmethod
    def deserialize(
        cls,
        state: Mapping[str, Any],
        config: ConfigLike = None,
        on_event: EventCallback | None = None,
        priors: PriorsLike = None,
        path: str = "self_model",
    ) -> AtmaDarshana:
        """Restore from `serialize()` output. Only the original's fields are required; the
        rest default as the original would rebuild them."""
        check_map(state, path)
        atma = cls(config, on_event, priors)
        for name, data in read_map(state, "tool_mastery", path).items():
            where = f"{path}.tool_mastery.{check_str(name, f'{path}.tool_mastery key')}"
            atma._tools[name] = ToolRecord.from_state(data, where)
        for i, limitation in enumerate(read_list(state, "known_limitations", path)):
            atma.known_limitations.append(check_str(limitation, f"{path}.known_limitations[{i}]"))
        atma.calibration = read_float(state, "calibration", path, 0.0, CALIBRATION_CAP)
        atma._velocity = read_float(state, "learning_velocity", path, -1.0, 1.0)
        for key, value in read_map(state, "style_fingerprint", path).items():
            atma._style[check_str(key, f"{path}.style_fingerprint key")] = check_float(
                value, f"{path}.style_fingerprint.{key}", 0.0, 1.0
            )
        atma._cal.restore(state, path)
        total_calls = sum(r.total for r in atma._tools.values())
        atma._total_calls = read_int(state, "total_calls", path, default=total_calls)
        atma._turns = read_int(state, "turns", path, default=0)
        atma._calls_this_turn = read_int(state, "calls_this_turn", path, default=0)
        atma._recovery_total = read_int(state, "recovery_total", path, default=0)
        atma._recovery_count = read_int(state, "recovery_count", path, default=0)
        return atma
