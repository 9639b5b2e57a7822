"""The context `before_turn` hands the agent, and its lazily built twin.

`ChetanaContext` is a frozen value. The controller returns a `LiveContext`, a subclass whose
affect is taken at once and whose focus, self-assessment, intentions and steering are built
on first read (all four together). The controller's gate (`pending.py`) builds it before any
change to the state it reads, so the values are exactly those an eager context would hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .bhava import Affect
from .focus import Focus
from .sankalpa import Intention

__all__ = ["ChetanaContext", "ContextSource", "LiveContext"]


class ContextSource(Protocol):
    """What builds a waiting context on first read (the controller; a protocol, so this
    module need not import the controller that imports it)."""

    def context_parts(self, affect: Affect) -> tuple[Focus, str, list[Intention], list[str]]:
        """Focus, self-assessment, intentions and steering for the current state."""
        ...


@dataclass(frozen=True, slots=True)
class ChetanaContext:
    """What `before_turn` gives the agent: the state it should steer by this turn."""

    affect: Affect  # valence, arousal, confidence, frustration
    focus: Focus  # top concepts, tool attention, most salient messages
    self_assessment: str  # under 200 characters
    intentions: list[Intention] = field(default_factory=list)  # active ones, oldest first
    steering: list[str] = field(default_factory=list)  # suggestions, possibly none

    @property
    def active_intentions(self) -> list[Intention]:
        """The original's name for `intentions`."""
        return self.intentions

    @property
    def steering_suggestions(self) -> list[str]:
        """The original's name for `steering`."""
        return self.steering

    @property
    def attention(self) -> Focus:
        """The original's name for `focus`."""
        return self.focus

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data (for a trace, a log or a template that wants dicts)."""
        focus = self.focus  # read once (a live context's focus is a property)
        return {
            "affect": self.affect._asdict(),
            "focus": {
                "concepts": [{"concept": name, "weight": weight} for name, weight in focus.concepts],
                "tools": [{"tool": name, "weight": weight} for name, weight in focus.tools],
                "messages": list(focus.messages),
            },
            "self_assessment": self.self_assessment,
            "intentions": [_intention_dict(i) for i in self.intentions],
            "steering": list(self.steering),
        }


def _intention_dict(intention: Intention) -> dict[str, Any]:
    # Intention._asdict() with lists for the tuples, as one dict display (several times
    # faster than _asdict(); a context's intentions become plain data every pipeline turn).
    (ident, goal, priority, status, progress, created, advanced, evidence, subgoals, stale,
     mentions) = intention  # fmt: skip
    return {
        "id": ident,
        "goal": goal,
        "priority": priority,
        "status": status,
        "progress": progress,
        "created_turn": created,
        "last_advanced_turn": advanced,
        "evidence": list(evidence),
        "subgoals": list(subgoals),
        "stale_turns": stale,
        "mention_count": mentions,
    }


# The slots of ChetanaContext, written and read directly: LiveContext shadows four of them
# with properties, and the frozen __setattr__ would refuse a write anyway.
_AFFECT = ChetanaContext.__dict__["affect"]
_FOCUS = ChetanaContext.__dict__["focus"]
_ASSESSMENT = ChetanaContext.__dict__["self_assessment"]
_INTENTIONS = ChetanaContext.__dict__["intentions"]
_STEERING = ChetanaContext.__dict__["steering"]
_FIELDS = ("affect", "focus", "self_assessment", "intentions", "steering")
_new = object.__new__


class LiveContext(ChetanaContext):
    """A `ChetanaContext` built on first read from the controller that handed it out (see
    the module docstring); equal to the eager context of the same moment."""

    __slots__ = ("__weakref__", "_source")

    def __init__(
        self,
        affect: Affect,
        focus: Focus,
        self_assessment: str,
        intentions: list[Intention] | None = None,
        steering: list[str] | None = None,
    ) -> None:
        # The dataclass signature, for dataclasses.replace() and copies: a built context.
        _SOURCE.__set__(self, None)
        _AFFECT.__set__(self, affect)
        _FOCUS.__set__(self, focus)
        _ASSESSMENT.__set__(self, self_assessment)
        _INTENTIONS.__set__(self, [] if intentions is None else intentions)
        _STEERING.__set__(self, [] if steering is None else steering)

    @classmethod
    def waiting(cls, source: ContextSource, affect: Affect) -> LiveContext:
        """A context whose affect is `affect` and the rest is built from `source` when read."""
        context = _new(cls)
        _SOURCE.__set__(context, source)
        _AFFECT.__set__(context, affect)
        return context

    def _resolve(self) -> None:
        source = self._source
        if source is None:
            return
        affect = _AFFECT.__get__(self, LiveContext)
        focus, assessment, intentions, steering = source.context_parts(affect)
        _FOCUS.__set__(self, focus)
        _ASSESSMENT.__set__(self, assessment)
        _INTENTIONS.__set__(self, intentions)
        _STEERING.__set__(self, steering)
        _SOURCE.__set__(self, None)  # built: only now, so a build that raised can be retried

    @property  # type: ignore[override]
    def focus(self) -> Focus:
        """Top concepts, tool attention, most salient messages."""
        if self._source is not None:
            self._resolve()
        return _FOCUS.__get__(self, LiveContext)  # type: ignore[no-any-return]

    @property  # type: ignore[override]
    def self_assessment(self) -> str:
        """Under 200 characters."""
        if self._source is not None:
            self._resolve()
        return _ASSESSMENT.__get__(self, LiveContext)  # type: ignore[no-any-return]

    @property  # type: ignore[override]
    def intentions(self) -> list[Intention]:
        """The active intentions, oldest first."""
        if self._source is not None:
            self._resolve()
        return _INTENTIONS.__get__(self, LiveContext)  # type: ignore[no-any-return]

    @property  # type: ignore[override]
    def steering(self) -> list[str]:
        """Suggestions, possibly none."""
        if self._source is not None:
            self._resolve()
        return _STEERING.__get__(self, LiveContext)  # type: ignore[no-any-return]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        # Equal to an eager ChetanaContext with the same values (the dataclass __eq__
        # compares only instances of one class).
        if isinstance(other, ChetanaContext):
            return self._values() == tuple(getattr(other, name) for name in _FIELDS)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as ChetanaContext: it holds lists

    def __repr__(self) -> str:
        values = ", ".join(f"{n}={v!r}" for n, v in zip(_FIELDS, self._values(), strict=True))
        return f"ChetanaContext({values})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles are plain (built) ChetanaContexts.
        return (ChetanaContext, self._values())


_SOURCE = LiveContext.__dict__["_source"]  # the frozen __setattr__ is slow; the slot is not
