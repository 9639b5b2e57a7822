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

__all__ = ["DriveRules", "Drives", "RichPersona", "conflict_index", "format_persona", "response_kind", "update_drives"]


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
class DriveRules:
    """The constants of the drives' move after a turn (the original's values by default).
    `aggressive_conflict`: a conflict index at or above it makes a turn aggressive whatever
    its emotion."""

    aggressive_conflict: float = 8.5
    ego_step: float = 0.05
    awareness_step: float = 0.01


_AGGRESSIVE = frozenset({"anger", "frustration"})
_FEARFUL = frozenset({"fear", "anxiety"})


def response_kind(emotion: str | None, conflict: float, rules: DriveRules = DriveRules()) -> str:
    """The original's response kind: "aggressive" when the emotion is anger or frustration or
    the conflict index is >= 8.5; "guilt" when the emotion is fear or anxiety; else
    "reflective"."""
    if emotion in _AGGRESSIVE or conflict >= rules.aggressive_conflict:
        return "aggressive"
    if emotion in _FEARFUL:
        return "guilt"
    return "reflective"


def _clamp(value: float, top: float) -> float:
    return min(max(value, 0.0), top)


def update_drives(drives: Drives, emotion: str | None, intensity: float, rules: DriveRules = DriveRules()) -> Drives:
    """The drives after a turn with `emotion` at `intensity` (the original's
    `update_drives_after_turn`; id, ego, superego held to [0, 10], self-awareness to [0, 1]):

    1. ego += 0.05, self_awareness += 0.01;
    2. by `response_kind` (read at the conflict index before the turn) — aggressive: id +=
       0.18 + 0.10·intensity, superego −= 0.08, ego −= 0.06; guilt: superego += 0.20 +
       0.10·intensity, id −= 0.08, self_awareness += 0.03; reflective: superego += 0.08 +
       0.05·intensity, id −= 0.06, ego += 0.06, self_awareness += 0.02;
    3. anger or frustration: id += 0.10; fear or anxiety: superego += 0.08;
    4. each value rounded to 4 decimals (so long runs stay readable and reproducible).

    An explicit `conflict` stays as it is (it overrides the derived index)."""
    i, e, s, a = drives.id, drives.ego + rules.ego_step, drives.superego, drives.self_awareness + rules.awareness_step
    e, a = _clamp(e, 10.0), _clamp(a, 1.0)
    kind = response_kind(emotion, conflict_index(drives), rules)
    if kind == "aggressive":
        i, s, e = _clamp(i + 0.18 + 0.10 * intensity, 10.0), _clamp(s - 0.08, 10.0), _clamp(e - 0.06, 10.0)
    elif kind == "guilt":
        s, i, a = _clamp(s + 0.20 + 0.10 * intensity, 10.0), _clamp(i - 0.08, 10.0), _clamp(a + 0.03, 1.0)
    else:
        s, i = _clamp(s + 0.08 + 0.05 * intensity, 10.0), _clamp(i - 0.06, 10.0)
        e, a = _clamp(e + 0.06, 10.0), _clamp(a + 0.02, 1.0)
    if emotion in _AGGRESSIVE:
        i = _clamp(i + 0.10, 10.0)
    if emotion in _FEARFUL:
        s = _clamp(s + 0.08, 10.0)
    return Drives(round(i, 4), round(e, 4), round(s, 4), round(a, 4), drives.conflict)


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
