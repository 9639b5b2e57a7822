"""The Chetana controller: runs the four subsystems through a turn (before_turn, tool
results, after_turn) and hands the agent a `ChetanaContext` to steer by."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .atma import AtmaDarshana
from .bhava import Affect, Bhava
from .config import ConfigLike, PriorsLike
from .context import ChetanaContext, LiveContext
from .dhyana import Dhyana, Focus
from .errors import InputError, StateError
from .events import EventCallback
from .pending import NO_GATE, Gate
from .report import CognitiveReport, build_report
from .sankalpa import Intention, Sankalpa
from .state import check_map, read_int, read_list, read_map
from .subsystem import Subsystem

__all__ = ["STATE_VERSION", "ChetanaContext", "ChetanaController"]

STATE_VERSION = 1
SUCCESS_PERFORMANCE = 0.8  # tool-attention performance the original passes for a success
FAILURE_PERFORMANCE = 0.2

STEER_FRUSTRATED = "Consider a simpler approach — frustration is high"
STEER_CONFIDENT = "High confidence — can proceed autonomously"
STEER_OVERCONFIDENT = "May be overconfident — verify assumptions"
STEER_UNDERCONFIDENT = "Underconfident — trust your capabilities more"


_waiting = LiveContext.waiting


def _check_latency(latency_ms: Any) -> None:
    kind = type(latency_ms)
    exact = kind is float or kind is int  # the fast path; bool is an int but not a latency
    if not exact and (isinstance(latency_ms, bool) or not isinstance(latency_ms, int | float)):
        raise InputError(f"latency_ms must be a finite number >= 0, got {latency_ms!r}")
    if not 0.0 <= latency_ms < math.inf:
        raise InputError(f"latency_ms must be a finite number >= 0, got {latency_ms!r}")


class ChetanaController(Subsystem):
    """Orchestrates Bhava, Dhyana, Atma-Darshana and Sankalpa.

    Per turn: `before_turn(text)` (intentions, concepts, the turn's message) returns a
    `ChetanaContext`; `after_tool_execution(...)` once per tool or step result; `after_turn()`
    decays affect, refreshes salience and ages the goals. State round-trips through
    `serialize()` / `ChetanaController.deserialize(...)` as plain JSON.
    """

    __slots__ = (
        "_atma",
        "_dhyana",
        "_gate",
        "_on_event",
        "_sankalpa",
        "_tolerance",
        "_turn",
        "bhava",
    )

    def _start(self) -> None:
        # The subsystems start without a callback: `Subsystem.__init__` sets `on_event` next,
        # and its setter hands the callback to all four.
        self._on_event: EventCallback | None = None
        self._turn = 0  # completed turns
        self._tolerance = self.priors.calibration_tolerance
        self._gate = Gate()  # shared with the subsystems a context reads (see pending.py)
        self.bhava = Bhava(self.config, None, self.priors)
        self.dhyana = Dhyana(self.config)
        self.atma = AtmaDarshana(self.config, None, self.priors)
        self.sankalpa = Sankalpa(self.config, None, self.priors)

    # The subsystems a context reads: setting one (deserialize does) settles a waiting
    # context first, then hands the new one the gate.

    @property
    def dhyana(self) -> Dhyana:
        """Attention."""
        return self._dhyana

    @dhyana.setter
    def dhyana(self, system: Dhyana) -> None:
        self._attach("_dhyana", system)

    @property
    def atma(self) -> AtmaDarshana:
        """The self-model."""
        return self._atma

    @atma.setter
    def atma(self, system: AtmaDarshana) -> None:
        self._attach("_atma", system)

    @property
    def sankalpa(self) -> Sankalpa:
        """Intentions."""
        return self._sankalpa

    @sankalpa.setter
    def sankalpa(self, system: Sankalpa) -> None:
        self._attach("_sankalpa", system)

    def _attach(self, slot: str, system: Dhyana | AtmaDarshana | Sankalpa) -> None:
        gate = self._gate
        if gate.ref is not None:
            gate.settle()
        old = getattr(self, slot, None)
        if old is not None and old is not system:
            old._gate = NO_GATE
        setattr(self, slot, system)
        system._gate = gate

    @property
    def on_event(self) -> EventCallback | None:
        """The event callback; setting it rewires all four subsystems."""
        return self._on_event

    @on_event.setter
    def on_event(self, callback: EventCallback | None) -> None:
        self._on_event = callback
        for system in (self.bhava, self._dhyana, self._atma, self._sankalpa):
            system.on_event = callback

    @property
    def turn(self) -> int:
        """How many turns have completed (`after_turn` calls)."""
        return self._turn

    # --- the turn ----------------------------------------------------------------------

    def before_turn(self, text: str | None = None, *, correction: bool = False) -> ChetanaContext:
        """Take in the user's message: extract intentions, track concepts, register the
        message for salience (flagged when the host detected a user correction), and return
        the context to steer this turn by."""
        if text is not None and not isinstance(text, str):
            raise InputError(f"text must be a string or None, got {type(text).__name__}")
        if self.config.enabled:
            if text:
                self._sankalpa.extract_from_message(text)
                self._dhyana.track_concepts(text)
            self._dhyana.add_message(f"turn-{self._turn}", False, correction)
        return self.context()

    def context(self) -> ChetanaContext:
        """The current context, without taking in a message.

        Its focus, self-assessment, intentions and steering are built when first read, or
        before the state they come from changes, whichever is first (see `pending.py`): the
        values are those of this moment either way."""
        context = _waiting(self, self.bhava.state)
        self._gate.hold(context)
        return context

    def context_parts(self, affect: Affect) -> tuple[Focus, str, list[Intention], list[str]]:
        """What a LiveContext builds when first read (`ContextSource`): focus, self-assessment,
        intentions and steering of the current state."""
        intentions = self._sankalpa.get_active_intentions()
        return (
            self._dhyana.focus(),
            self._atma.get_self_assessment(),
            intentions,
            self._steering(affect, intentions),
        )

    def steering(self, affect: Affect | None = None) -> list[str]:
        """The steering suggestions of the current state — what `context().steering` holds —
        without building the focus and the self-assessment (a host that shows only affect and
        steering need not pay for them). ``affect``: the state's affect, if the caller has it."""
        return self._steering(self.bhava.state if affect is None else affect,
                              self._sankalpa.get_active_intentions())

    def _eager_context(self) -> ChetanaContext:
        # The context built at once (the reference the lazy one is tested against).
        affect = self.bhava.state
        return ChetanaContext(affect, *self.context_parts(affect))

    def _steering(self, affect: Affect, intentions: list[Intention]) -> list[str]:
        cfg = self.config
        suggestions = []
        if affect.frustration >= cfg.frustration_alert_threshold:
            suggestions.append(STEER_FRUSTRATED)
        if affect.confidence >= cfg.confidence_autonomy_threshold:
            suggestions.append(STEER_CONFIDENT)
        half = self._sankalpa.patience / 2
        suggestions.extend(
            f"Goal '{i.goal}' may be stalling — refocus?"
            for i in intentions
            if i.stale_turns > half
        )
        calibration = self._atma.calibration
        tolerance = self._tolerance
        if calibration > 1.0 + tolerance:
            suggestions.append(STEER_OVERCONFIDENT)
        if calibration < 1.0 - tolerance:
            suggestions.append(STEER_UNDERCONFIDENT)
        return suggestions

    def after_user_correction(self) -> ChetanaContext:
        """The user's message corrects the host (the host detected it: "no, I meant…"):
        frustration rises now, by `frustration_per_correction` × reactivity, so the context of
        the turn it starts — returned here — shows it. Report a correction here or with a tool
        result (`after_tool_execution(..., correction=True)`), not both: each counts it."""
        if self.config.enabled:
            self.bhava.on_correction()
        return self.context()

    def after_tool_execution(
        self,
        tool: str,
        success: bool,
        latency_ms: float,
        content: str | None,
        correction: bool = False,
    ) -> None:
        """Report one tool (or step) result to all four subsystems, in the original's order:
        affect, attention, self-model, intentions."""
        if type(tool) is not str and not isinstance(tool, str):
            raise InputError(f"tool must be a string, got {type(tool).__name__}")
        if content is not None and type(content) is not str and not isinstance(content, str):
            raise InputError(f"content must be a string or None, got {type(content).__name__}")
        kind = type(latency_ms)
        if (kind is not float and kind is not int) or not 0.0 <= latency_ms < math.inf:
            _check_latency(latency_ms)  # before any change: a bad call leaves no trace
        if not self.config.enabled:
            return
        success = bool(success)
        atma, dhyana = self._atma, self._dhyana
        # The prediction is the tool's success rate before this call (the original passed
        # none, so its calibration never moved from 1.0).
        record = atma._tools.get(tool)  # atma.success_rate(tool), inlined
        predicted = record.rate if record is not None else None
        self.bhava.on_tool_result(tool, not success, correction)
        dhyana.on_tool_used(tool, success, SUCCESS_PERFORMANCE if success else FAILURE_PERFORMANCE)
        if not success or correction:
            dhyana.flag_latest_message(error=not success, correction=correction)
        atma._record(tool, success, latency_ms, predicted)  # the inputs are checked above
        if content:
            self._sankalpa.on_tool_result(tool, content)

    @property
    def reads_results(self) -> bool:
        """Whether `after_tool_execution`'s `content` can change anything now (an active
        intention has keywords it could hold): when not, a host may pass None instead of
        building it, and the controller ends in the same state."""
        return self.config.enabled and self._sankalpa.reads_results

    def after_turn(self) -> None:
        """Close the turn: affect decays, salience refreshes, goals age, the turn counts."""
        if not self.config.enabled:
            return
        self.bhava.decay_turn()
        self._dhyana.refresh_salience()
        self._sankalpa.end_turn()
        self._atma.end_turn()
        self._turn += 1

    def rest(self) -> None:
        """Leave only what `serialize` keeps, so that this controller goes on exactly as one
        restored from `serialize()` would (message salience is ephemeral): a host keeping a
        controller between turns calls it after `after_turn` instead of restoring."""
        self._dhyana.forget_messages()

    # --- external signals --------------------------------------------------------------

    def on_sub_agent_spawn(self) -> None:
        """A sub-agent was spawned: arousal rises."""
        if self.config.enabled:
            self.bhava.on_sub_agent_spawn()

    def update_confidence(self, value: float) -> None:
        """Set confidence from an external success rate (clamped to [0, 1])."""
        if self.config.enabled:
            self.bhava.update_confidence(value)

    def mark_tool_disabled(self, tool: str, reason: str) -> None:
        """The host disabled a tool; it becomes a known limitation."""
        if self.config.enabled:
            self._atma.mark_tool_disabled(tool, reason)

    def mark_context_recovery(self) -> None:
        """The host recovered lost context; a known limitation."""
        if self.config.enabled:
            self._atma.mark_context_recovery()

    def achieve(self, intention_id: str) -> bool:
        """Mark an intention achieved; False if there is no such intention."""
        return self._sankalpa.achieve(intention_id)

    def focus_window(self) -> list[str]:
        """Ids of the most salient turn messages ("turn-<n>"), highest first."""
        return self._dhyana.get_focus_window()

    # --- inspection and persistence ----------------------------------------------------

    def cognitive_report(self) -> CognitiveReport:
        """Everything `soul chetana` shows, as a frozen report (`to_dict()`, `render()`)."""
        return build_report(self.bhava, self._dhyana, self._atma, self._sankalpa)

    def serialize(self) -> dict[str, Any]:
        """The whole state as JSON-safe data (no NaN or Infinity); message salience is
        ephemeral and the self-model is left out when `self_model_persistence` is off."""
        return {
            "version": STATE_VERSION,
            "turn": self._turn,
            "affect": self.bhava.serialize(),
            "attention": self._dhyana.serialize(),
            "self_model": self._atma.serialize() if self.config.self_model_persistence else None,
            "intentions": self._sankalpa.serialize(),
        }

    @classmethod
    def deserialize(
        cls,
        state: Mapping[str, Any],
        config: ConfigLike = None,
        on_event: EventCallback | None = None,
        priors: PriorsLike = None,
    ) -> ChetanaController:
        """Restore a controller from `serialize()` output (after a JSON round trip or not).
        Raises `StateError` naming the path of the first bad value."""
        check_map(state, "state")
        version = read_int(state, "version", "state", lo=1, default=STATE_VERSION)
        if version > STATE_VERSION:
            raise StateError(
                f"state.version is {version}, newer than this engine's {STATE_VERSION}; "
                "upgrade soulgraph to read it"
            )
        controller = cls(config, on_event, priors)
        cfg, pri = controller.config, controller.priors
        controller._turn = read_int(state, "turn", "state", default=0)
        controller.bhava = Bhava.deserialize(read_map(state, "affect", "state"), cfg, on_event, pri)
        controller.dhyana = Dhyana.deserialize(read_map(state, "attention", "state"), cfg, on_event)
        self_model = state.get("self_model")
        if self_model is not None:
            controller.atma = AtmaDarshana.deserialize(self_model, cfg, on_event, pri)
        intentions = read_list(state, "intentions", "state")
        controller.sankalpa = Sankalpa.deserialize(
            intentions, cfg, on_event, pri, turn=controller._turn
        )
        return controller
