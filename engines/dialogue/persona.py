"""Drives and rich personas: an agent's internal state vector and the persona text formatted
from it.

Drives follow the blueprint's scale: id, ego and superego in [0, 10] (5 is balanced),
self_awareness in [0, 1]. The conflict index is |id − ego| + |superego − ego|, in [0, 20]:
the ego mediates between impulse (id) and norm (superego), so the conflict it carries is the
sum of its distances to both. Balanced drives (5, 5, 5) give 0; a strong id against a weak
ego and a strict superego (9, 3, 9) give 12, above the 8 at which the seed rules turn to
synthesis. An explicit `conflict` value overrides the formula.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Drives", "RichPersona", "conflict_index", "format_persona"]


@dataclass(frozen=True)
class Drives:
    """An agent's drives (see the module docstring for the scale); `conflict` overrides the
    derived conflict index when set."""

    id: float = 5.0
    ego: float = 5.0
    superego: float = 5.0
    self_awareness: float = 0.5
    conflict: float | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Drives:
        """Drives from a mapping (unknown keys and non-numbers are ignored)."""
        values = {k: float(v) for k, v in data.items()
                  if k in cls.__dataclass_fields__ and isinstance(v, int | float) and not isinstance(v, bool)}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def conflict_index(drives: Drives | Mapping[str, Any]) -> float:
    """|id − ego| + |superego − ego| (range 0–20), or the explicit `conflict` when given."""
    d = drives if isinstance(drives, Drives) else Drives.from_mapping(drives)
    if d.conflict is not None:
        return d.conflict
    return abs(d.id - d.ego) + abs(d.superego - d.ego)


@dataclass(frozen=True)
class RichPersona:
    """A persona whose text is formatted from the drives each turn: `core` (who the agent
    is), `traits`, an optional longer `text` (e.g. the persona file) and a `style`."""

    name: str
    core: str = ""
    traits: tuple[str, ...] = ()
    text: str = ""
    style: str = ""


def _level(value: float, low: float, high: float) -> str:
    return "low" if value < low else "high" if value > high else "moderate"


def format_persona(persona: RichPersona, drives: Drives | Mapping[str, Any] | None = None) -> str:
    """The persona text for the prompt: the core, the traits, the longer text, and how the
    current drives colour the voice (each drive's level: low < 4 <= moderate <= 6 < high;
    self-awareness low < 0.4 <= moderate <= 0.7 < high; conflict low < 4 <= moderate <= 8 <
    high)."""
    d = drives if isinstance(drives, Drives) else Drives.from_mapping(drives or {})
    lines = [f"You are {persona.name}." + (f" {persona.core}" if persona.core else "")]
    if persona.traits:
        lines.append("Traits: " + ", ".join(persona.traits) + ".")
    if persona.text.strip():
        lines.append(persona.text.strip())
    conflict = conflict_index(d)
    lines.append(
        f"Current state: impulse (id) {d.id:g} ({_level(d.id, 4, 6)}), reason (ego) {d.ego:g} "
        f"({_level(d.ego, 4, 6)}), conscience (superego) {d.superego:g} ({_level(d.superego, 4, 6)}), "
        f"self-awareness {d.self_awareness:g} ({_level(d.self_awareness, 0.4, 0.7)}), "
        f"inner conflict {conflict:g} ({_level(conflict, 4, 8)})."
    )
    if conflict > 8:
        lines.append("Your inner conflict is high: you feel torn, and it shows.")
    if persona.style:
        lines.append(f"Style: {persona.style}.")
    return "\n".join(lines)
