"""Bhava (affect): a four-dimensional emotional state driven by tool outcomes, sub-agent
spawns, external confidence and per-turn decay toward neutral."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from .config import ConfigLike, PriorsLike
from .errors import InputError
from .events import CONFIDENT, FRUSTRATED, EventCallback
from .state import check_bool, check_map, read_float, read_list
from .subsystem import Subsystem

__all__ = [
    "AROUSAL_ERROR_SPIKE",
    "AROUSAL_SPAWN_SPIKE",
    "NEUTRAL_CONFIDENCE",
    "VALENCE_WINDOW",
    "Affect",
    "Bhava",
]

VALENCE_WINDOW = 20  # outcomes in the sliding window valence is computed over
AROUSAL_ERROR_SPIKE = 0.2
AROUSAL_SPAWN_SPIKE = 0.1
NEUTRAL_CONFIDENCE = 0.5


class Affect(NamedTuple):
    """A snapshot of the affective state (immutable, so a context cannot drift)."""

    valence: float  # [-1, 1], negative to positive
    arousal: float  # [0, 1], calm to excited
    confidence: float  # [0, 1], uncertain to certain
    frustration: float  # [0, 1], calm to frustrated


_new_affect = tuple.__new__


def _clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


class Bhava(Subsystem):
    """The affective state machine.

    Tool results move frustration (+error, +correction, -success), spike arousal on errors
    and recompute valence as (successes - failures) / n over the last 20 outcomes.
    `decay_turn` drifts valence and frustration toward 0 and arousal toward the base arousal;
    confidence only changes through `update_confidence`. Fires `frustrated` and `confident`
    when those dimensions rise through their thresholds.
    """

    __slots__ = (
        "_arousal",
        "_confidence",
        "_frustration",
        "_gain",
        "_outcomes",
        "_successes",
        "_valence",
        "on_event",
    )

    def _start(self) -> None:
        self._gain = self.priors.reactivity_gain  # the priors are frozen: computed once
        self._valence = 0.0
        self._arousal = self.priors.base_arousal
        self._confidence = NEUTRAL_CONFIDENCE
        self._frustration = 0.0
        self._outcomes: deque[bool] = deque(maxlen=VALENCE_WINDOW)  # True = success
        self._successes = 0

    # --- reading -----------------------------------------------------------------------

    @property
    def state(self) -> Affect:
        """The current affect as an immutable snapshot."""
        # tuple.__new__ skips NamedTuple's Python-level __new__ (a context takes one per turn).
        return _new_affect(
            Affect, (self._valence, self._arousal, self._confidence, self._frustration)
        )

    def get_state(self) -> Affect:
        """The current affect as an immutable snapshot (same as `state`)."""
        return Affect(self._valence, self._arousal, self._confidence, self._frustration)

    @property
    def valence(self) -> float:
        """Emotional polarity in [-1, 1]."""
        return self._valence

    @property
    def arousal(self) -> float:
        """Activation in [0, 1]."""
        return self._arousal

    @property
    def confidence(self) -> float:
        """Self-assessed certainty in [0, 1]."""
        return self._confidence

    @property
    def frustration(self) -> float:
        """Accumulated frustration in [0, 1]."""
        return self._frustration

    # --- signals -----------------------------------------------------------------------

    def on_tool_result(self, tool: str, is_error: bool, is_correction: bool = False) -> None:
        """Update affect after a tool ran: a correction weighs more than an error, a success
        brings relief; errors spike arousal; valence follows the recent success ratio."""
        cfg = self.config
        before = self._frustration
        gain = self._gain
        if is_correction:
            frustration = before + cfg.frustration_per_correction * gain
        elif is_error:
            frustration = before + cfg.frustration_per_error * gain
        else:
            frustration = before - cfg.frustration_decay_per_success
        # _clamp01 inlined: this runs for every tool result
        frustration = 0.0 if frustration < 0.0 else 1.0 if frustration > 1.0 else frustration
        self._frustration = frustration
        if is_error:
            arousal = self._arousal + AROUSAL_ERROR_SPIKE * gain
            self._arousal = 0.0 if arousal < 0.0 else 1.0 if arousal > 1.0 else arousal

        outcomes = self._outcomes
        success = not is_error
        if len(outcomes) == VALENCE_WINDOW and outcomes[0]:
            self._successes -= 1  # the oldest success is about to leave the window
        outcomes.append(success)
        if success:
            self._successes += 1
        n = len(outcomes)
        self._valence = (2 * self._successes - n) / n

        threshold = cfg.frustration_alert_threshold
        if self.on_event is not None and before < threshold <= frustration:
            self.on_event(FRUSTRATED, {"frustration": frustration, "tool": tool})

    def on_correction(self, source: str = "user") -> None:
        """The user corrected the host, apart from any tool result: frustration rises as for
        a corrected tool result; arousal and the valence window are untouched (nothing ran)."""
        before = self._frustration
        frustration = before + self.config.frustration_per_correction * self._gain
        self._frustration = 0.0 if frustration < 0.0 else 1.0 if frustration > 1.0 else frustration
        threshold = self.config.frustration_alert_threshold
        if self.on_event is not None and before < threshold <= self._frustration:
            self.on_event(FRUSTRATED, {"frustration": self._frustration, "tool": source})

    def on_sub_agent_spawn(self) -> None:
        """A sub-agent was spawned: complexity is rising, so arousal spikes."""
        self._arousal = _clamp01(self._arousal + AROUSAL_SPAWN_SPIKE * self.priors.reactivity_gain)

    def update_confidence(self, value: float) -> None:
        """Set confidence from an external success rate (clamped to [0, 1]); confidence is
        never decayed, it reflects capability rather than mood."""
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise InputError(f"confidence must be a number in [0, 1], got {value!r}")
        before = self._confidence
        self._confidence = after = _clamp01(float(value))
        threshold = self.config.confidence_autonomy_threshold
        if self.on_event is not None and before < threshold <= after:
            self.on_event(CONFIDENT, {"confidence": after})

    def decay_turn(self) -> None:
        """End of turn: valence and frustration drift toward 0, arousal toward its base."""
        rate = self.config.affect_decay_rate
        keep = 1.0 - rate
        self._valence *= keep
        self._frustration *= keep
        self._arousal += (self.priors.base_arousal - self._arousal) * rate

    # --- persistence -------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        """The four dimensions plus the valence window, as a JSON-safe dict."""
        return {
            "valence": self._valence,
            "arousal": self._arousal,
            "confidence": self._confidence,
            "frustration": self._frustration,
            "recent_outcomes": list(self._outcomes),
        }

    @classmethod
    def deserialize(
        cls,
        state: Mapping[str, Any],
        config: ConfigLike = None,
        on_event: EventCallback | None = None,
        priors: PriorsLike = None,
        path: str = "affect",
    ) -> Bhava:
        """Restore from `serialize()` output (a state without `recent_outcomes`, as the
        original wrote it, restores with an empty window)."""
        check_map(state, path)
        bhava = cls(config, on_event, priors)
        bhava._valence = read_float(state, "valence", path, -1.0, 1.0)
        bhava._arousal = read_float(state, "arousal", path, 0.0, 1.0)
        bhava._confidence = read_float(state, "confidence", path, 0.0, 1.0)
        bhava._frustration = read_float(state, "frustration", path, 0.0, 1.0)
        outcomes = read_list(state, "recent_outcomes", path, default=[])
        for i, outcome in enumerate(outcomes):
            check_bool(outcome, f"{path}.recent_outcomes[{i}]")
        for outcome in outcomes[-VALENCE_WINDOW:]:
            bhava._outcomes.append(outcome)
            bhava._successes += outcome
        return bhava
