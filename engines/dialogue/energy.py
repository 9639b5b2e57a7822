"""Energy: each turn drains an agent's energy; low energy (or the schedule) brings a dream.

The reference's FixyRegulator: start 100; each turn drains uniform(8, 15) + 0.4 · conflict,
capped at 30; at or below 35 a dream cycle is due; between 35 and 60 a hallucination-risk
flag is raised with probability 0.10; a dream is also due every `dream_every` (7) turns.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from .errors import RulesError

__all__ = ["EnergyRules", "EnergyStep", "drain"]


@dataclass(frozen=True)
class EnergyRules:
    """The energy constants (the reference's values by default)."""

    start: float = 100.0
    drain_min: float = 8.0
    drain_max: float = 15.0
    conflict_factor: float = 0.4
    drain_cap: float = 30.0
    dream_below: float = 35.0
    dream_every: int = 7
    risk_below: float = 60.0
    risk_probability: float = 0.10

    def __post_init__(self) -> None:
        if self.drain_min > self.drain_max:
            raise RulesError(f"drain_min {self.drain_min} exceeds drain_max {self.drain_max}")
        if not 0.0 <= self.risk_probability <= 1.0:
            raise RulesError(f"risk_probability must be within [0, 1], got {self.risk_probability}")
        if self.dream_every < 0:
            raise RulesError(f"dream_every must be >= 0 (0: never by schedule), got {self.dream_every}")


@dataclass(frozen=True)
class EnergyStep:
    """One turn's energy: level before and after the drain, the drain, whether a dream is due
    and why ("low_energy" or "schedule"; "" when none), and the hallucination-risk flag."""

    before: float
    drained: float
    level: float
    dream: bool
    dream_reason: str
    hallucination_risk: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def drain(level: float, conflict: float, turn: int, rng: random.Random, rules: EnergyRules = EnergyRules()) -> EnergyStep:
    """Drain one turn: drained = min(uniform(drain_min, drain_max) + conflict_factor ·
    max(conflict, 0), drain_cap) (one `rng.uniform` draw); level = max(before − drained, 0).
    A dream is due when level <= dream_below ("low_energy"), else when dream_every > 0 and
    turn % dream_every == 0 ("schedule"). The hallucination-risk roll (one `rng.random` draw,
    risk when < risk_probability) happens only when dream_below < level < risk_below. The
    recharge itself is the dream's (`dream` resets the level to `start`)."""
    drained = min(rng.uniform(rules.drain_min, rules.drain_max) + rules.conflict_factor * max(conflict, 0.0),
                  rules.drain_cap)
    after = max(level - drained, 0.0)
    reason = ""
    if after <= rules.dream_below:
        reason = "low_energy"
    elif rules.dream_every > 0 and turn > 0 and turn % rules.dream_every == 0:
        reason = "schedule"
    risk = False
    if rules.dream_below < after < rules.risk_below:
        risk = rng.random() < rules.risk_probability
    return EnergyStep(level, drained, after, bool(reason), reason, risk)
