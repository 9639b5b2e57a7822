"""The memory model: kinds (the seed's 26 node types), Bayesian confidence, decay, tiers.

Confidence is a Gaussian belief about how true/useful a memory is, kept as mean ``mu`` and
variance ``var`` with ``n`` observations. ``observe(v)`` is a Kalman update toward ``v`` in
[0, 1] (strengthen observes 1, weaken observes 0, a merged near-duplicate observes 1).
Decay is applied when read, not stored: after ``d`` idle days a memory of rate ``r`` has
``mu·e^(−r·d)`` and its variance drifts back toward the prior — so replaying the log gives the
same state whenever it runs, and no background writer is needed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from .errors import ConfigError
from .kinds import Kind

__all__ = [
    "DECAY_RATES",
    "MIN_CHARS",
    "Confidence",
    "Kind",
    "Memory",
    "Tier",
    "gate_reason",
    "parse_kind",
    "tier_of",
]

MIN_CHARS = 10
DAY = 86_400.0


# Per-day decay rates. The first six are the seed's; the rest are ours, set by the same
# logic: identity and structure never fade, lessons fade slowly, transient states fast.
DECAY_RATES: dict[Kind, float] = {
    Kind.BELIEF: 0.0,
    Kind.SYMBOL: 0.0,
    Kind.WISDOM: 0.005,
    Kind.CORRECTION: 0.005,
    Kind.PREFERENCE: 0.01,
    Kind.EPISODE: 0.03,
    Kind.PROJECT_ESSENCE: 0.0,
    Kind.ASPIRATION: 0.005,
    Kind.ENTITY: 0.005,
    Kind.TERM: 0.005,
    Kind.INSIGHT: 0.005,
    Kind.MILESTONE: 0.005,
    Kind.INTENTION: 0.01,
    Kind.FAILURE: 0.01,
    Kind.EDGE: 0.01,
    Kind.SUMMARY: 0.01,
    Kind.APPROACH: 0.01,
    Kind.REVIEW: 0.02,
    Kind.OUTCOME: 0.02,
    Kind.GAP: 0.02,
    Kind.PATTERN_STATE: 0.02,
    Kind.QUESTION: 0.03,
    Kind.MODULE_STATE: 0.03,
    Kind.DREAM: 0.05,
    Kind.SIGNAL: 0.05,
    Kind.STATE: 0.05,
}
assert len(DECAY_RATES) == len(Kind)


def parse_kind(kind: str | int | Kind) -> Kind:
    """``"episode"``, ``"Episode"``, ``3`` or ``Kind.EPISODE`` → ``Kind.EPISODE``."""
    if isinstance(kind, Kind):
        return kind
    try:
        if isinstance(kind, int):
            return Kind(kind)
        return Kind[kind.strip().upper().replace("-", "_").replace(" ", "_")]
    except (KeyError, ValueError):
        names = ", ".join(k.label for k in Kind)
        raise ConfigError(f"unknown memory kind {kind!r}; the kinds are: {names}") from None


PRIOR_MU = 0.7
PRIOR_VAR = 0.04
OBS_NOISE = 0.1  # variance of one observation: ~4 agreeing observations halve the variance


@dataclass(frozen=True, slots=True)
class Confidence:
    """A Bayesian confidence: mean, variance and the number of observations."""

    mu: float = PRIOR_MU
    var: float = PRIOR_VAR
    n: int = 0

    def observe(self, value: float, noise: float = OBS_NOISE) -> Confidence:
        """Kalman update toward ``value`` in [0, 1]: mean moves, variance shrinks."""
        value = min(max(value, 0.0), 1.0)
        gain = self.var / (self.var + noise)
        return Confidence(self.mu + gain * (value - self.mu), (1.0 - gain) * self.var, self.n + 1)

    def decay(self, rate: float, days: float) -> Confidence:
        """Confidence after ``days`` idle at ``rate`` per day (mean fades, doubt returns)."""
        if rate <= 0.0 or days <= 0.0:
            return self
        keep = math.exp(-rate * days)
        return Confidence(self.mu * keep, PRIOR_VAR + (self.var - PRIOR_VAR) * keep, self.n)


class Tier(StrEnum):
    """Where a memory sits by recent use: hot (today) … cold (a month idle or faded)."""

    HOT = "hot"
    WARM = "warm"
    COOL = "cool"
    COLD = "cold"


def tier_of(idle_days: float, confidence: float) -> Tier:
    """Tier from idle time and decayed confidence: <1 day hot, <7 warm, <30 cool, else cold."""
    if confidence < 0.1 or idle_days >= 30.0:
        return Tier.COLD
    if idle_days < 1.0:
        return Tier.HOT
    return Tier.WARM if idle_days < 7.0 else Tier.COOL


def gate_reason(text: str) -> str | None:
    """Why the quality gate refuses ``text`` (None: it passes). Duplicates are checked later."""
    stripped = text.strip()
    if len(stripped) < MIN_CHARS:
        return f"too short: {len(stripped)} < {MIN_CHARS} characters"
    return None


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory as stored: a read-only copy; change it through the Field."""

    id: str
    kind: Kind
    content: str
    embedding: np.ndarray = field(repr=False, compare=False)
    tags: tuple[str, ...] = ()
    realm: str | None = None
    source: str | None = None
    created: float = 0.0
    accessed: tuple[float, ...] = ()  # the most recent access times, oldest first
    access_count: int = 0
    last_active: float = 0.0  # last access or observation: decay runs from here
    confidence: Confidence = Confidence()
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    pending_embedding: bool = False  # the embedder fell back to a zero vector

    @property
    def decay_rate(self) -> float:
        """Per-day decay rate of this memory's kind."""
        return DECAY_RATES[self.kind]

    def confidence_at(self, now: float | None = None) -> Confidence:
        """Confidence decayed to ``now`` (seconds since the epoch; default: the clock)."""
        now = time.time() if now is None else now
        return self.confidence.decay(self.decay_rate, (now - self.last_active) / DAY)

    def tier(self, now: float | None = None) -> Tier:
        """The memory's tier at ``now``."""
        now = time.time() if now is None else now
        return tier_of((now - self.last_active) / DAY, self.confidence_at(now).mu)
