"""A dialogue turn as the rules see it, and the coercion of dicts/objects into turns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import StateError

__all__ = ["OBSERVER", "Turn", "as_turn", "as_turns"]

OBSERVER = "Fixy"
"""The observer's default name: a dict turn without `is_fixy` is Fixy's when its speaker is this."""


@dataclass(frozen=True)
class Turn:
    """One turn of a dialogue: who spoke, what, whether it was the observer (Fixy), and the
    optional signals some rules read — the emotion of the turn (`emotions.detect_emotion`)
    and its intensity, the speaker's conflict index at that turn, the topic, and the seed
    strategy it answered."""

    speaker: str
    text: str
    is_fixy: bool = False
    emotion: str | None = None
    conflict: float | None = None
    topic: str | None = None
    strategy: str | None = None
    intensity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The turn as JSON-ready data (every field is a plain value: no `asdict` deep copy, which
        a 10,000-turn dialogue's save would pay for every field of every turn)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], observer: str = OBSERVER) -> Turn:
        """A turn from a mapping with `speaker` (or `role`) and `text`; `is_fixy` defaults to
        speaker == `observer` (case-insensitive)."""
        speaker = data.get("speaker", data.get("role"))
        text = data.get("text", "")
        if not isinstance(speaker, str) or not isinstance(text, str):
            raise StateError(f"a turn needs a string 'speaker' (or 'role') and 'text'; got {dict(data)!r:.200}")
        conflict = data.get("conflict")
        intensity = data.get("intensity")
        return cls(
            speaker=speaker,
            text=text,
            is_fixy=bool(data.get("is_fixy", speaker.casefold() == observer.casefold())),
            emotion=data.get("emotion") if isinstance(data.get("emotion"), str) else None,
            conflict=float(conflict) if isinstance(conflict, int | float) and not isinstance(conflict, bool) else None,
            topic=data.get("topic") if isinstance(data.get("topic"), str) else None,
            strategy=data.get("strategy") if isinstance(data.get("strategy"), str) else None,
            intensity=float(intensity) if isinstance(intensity, int | float) and not isinstance(intensity, bool) else None,
        )


def as_turn(value: Any, observer: str = OBSERVER) -> Turn:
    """A `Turn` from a `Turn`, a mapping (see `Turn.from_dict`) or any object with `speaker`
    (or `role`) and `text` attributes (and optionally the other fields)."""
    if isinstance(value, Turn):
        return value
    if isinstance(value, Mapping):
        return Turn.from_dict(value, observer)
    fields = {name: getattr(value, name) for name in
              ("speaker", "role", "text", "is_fixy", "emotion", "conflict", "topic", "strategy", "intensity")
              if hasattr(value, name)}
    return Turn.from_dict(fields, observer)


def as_turns(values: Iterable[Any], observer: str = OBSERVER) -> tuple[Turn, ...]:
    """`as_turn` over a sequence."""
    return tuple(as_turn(v, observer) for v in values)
