"""The psyche: DefenseMechanism (flags on each memory), FreudianSlip (a flagged memory
surfaces) and SelfReplication (recurring themes are promoted), each switchable.

The functions that promote take the mind as `Any` with `subconscious` and `add_ltm` (an
`AgentMind`), so this module does not import the memory module (which imports it).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Any

from .words import words

__all__ = ["Promotion", "PsycheRules", "defense_flags", "freudian_slip", "self_replication"]

_LATIN = re.compile(r"[A-Za-z]{4,}")


@dataclass(frozen=True)
class PsycheRules:
    """The switches and constants (the reference's values by default)."""

    defense: bool = True
    painful_emotions: frozenset[str] = frozenset({"anger", "fear", "shame", "guilt", "anxiety"})
    intrusive_intensity: float = 0.75
    forbidden_words: frozenset[str] = frozenset({"forbidden", "secret", "dangerous"})
    slip: bool = True
    slip_probability: float = 0.15
    slip_window: int = 30
    self_replication: bool = True
    self_replicate_every: int = 10
    self_replicate_window: int = 50
    self_replicate_top: int = 3


@dataclass(frozen=True)
class Promotion:
    """A memory promoted to LTM by the psyche: the promoted entry (its `source` set),
    and the transcript marker ("[SLIP]" or "[SELF-REPL]")."""

    entry: Any
    marker: str

    @property
    def text(self) -> str:
        """What the transcript shows: the marker and the memory's content."""
        return f"{self.marker} {self.entry.content}"

    def to_dict(self) -> dict[str, Any]:
        return {"marker": self.marker, "text": self.text, "entry": self.entry.to_dict()}


def defense_flags(content: str, emotion: str | None, intensity: float,
                  rules: PsycheRules = PsycheRules()) -> tuple[bool, bool]:
    """(intrusive, suppressed): intrusive when the emotion is painful (anger, fear, shame,
    guilt, anxiety) and intensity > 0.75; suppressed when the content carries "forbidden",
    "secret" or "dangerous" as a whole word."""
    intrusive = emotion is not None and emotion.lower() in rules.painful_emotions and intensity > rules.intrusive_intensity
    suppressed = not rules.forbidden_words.isdisjoint(words(content))
    return intrusive, suppressed


def freudian_slip(mind: Any, rng: random.Random, rules: PsycheRules = PsycheRules()) -> Promotion | None:
    """After a non-Fixy turn: the candidates are the `slip_window` (30) most recent flagged
    subconscious entries; when there is one, one `rng.random()` draw < `slip_probability`
    (0.15) lets one of them (one `rng.choice`) surface: promoted to LTM with source
    "freudian_slip", marker "[SLIP]". Nothing is drawn when the switch is off or no entry is
    flagged."""
    if not rules.slip:
        return None
    candidates = [e for e in mind.subconscious if e.flagged][-rules.slip_window:]
    if not candidates or rng.random() >= rules.slip_probability:
        return None
    entry = replace(rng.choice(candidates), source="freudian_slip")
    mind.add_ltm(entry)
    return Promotion(entry, "[SLIP]")


def self_replication(mind: Any, turn: int, rules: PsycheRules = PsycheRules()) -> tuple[Promotion, ...]:
    """Every `self_replicate_every` (10) turns: over the `self_replicate_window` (50) most
    recent subconscious entries, the keywords ([A-Za-z]{4,}, lower-cased) found in >= 2
    entries recur; the entries carrying a recurring keyword, the `self_replicate_top` (3) of
    highest importance (ties: newer first), are promoted to LTM with source
    "self_replication", marker "[SELF-REPL]". Deterministic: no draws."""
    if not rules.self_replication or rules.self_replicate_every <= 0 or turn <= 0 or turn % rules.self_replicate_every:
        return ()
    recent = mind.subconscious[-rules.self_replicate_window:]
    sets = [frozenset(w.lower() for w in _LATIN.findall(e.content)) for e in recent]
    counts: dict[str, int] = {}
    for kw in sets:
        for w in kw:
            counts[w] = counts.get(w, 0) + 1
    recurring = {w for w, n in counts.items() if n >= 2}
    matching = [(e, i) for i, (e, kw) in enumerate(zip(recent, sets, strict=True)) if kw & recurring]
    matching.sort(key=lambda pair: (-pair[0].importance, -pair[1]))
    promotions = []
    for entry, _ in matching[:rules.self_replicate_top]:
        promoted = replace(entry, source="self_replication")
        mind.add_ltm(promoted)
        promotions.append(Promotion(promoted, "[SELF-REPL]"))
    return tuple(promotions)
