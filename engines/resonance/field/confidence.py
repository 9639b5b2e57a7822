"""Confidence now: each memory's confidence mean decayed by its kind's rate over its idle days.

The vectorised form of `Memory.confidence_at(now).mu` (and of `Memory.tier`), for the many
rows recall fusion, resonance and `Field.stats` weigh at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..memory import DAY, DECAY_RATES, Kind, Tier, tier_of

if TYPE_CHECKING:
    from ..store.state import State

__all__ = ["decayed_confidence", "tier_counts"]

_RATES = np.array([DECAY_RATES[Kind(i)] for i in range(len(Kind))])


def decayed_confidence(state: State, rows: np.ndarray, now: float) -> np.ndarray:
    """The confidence of each of ``rows`` at time ``now`` (float32, in [0, 1])."""
    rows = np.asarray(rows, np.int64)
    mu = np.array([state.mu[i] for i in rows])
    idle = np.array([now - state.last_active[i] for i in rows]) / DAY
    rate = _RATES[np.array([state.kind[i] for i in rows], np.int64)]
    return (mu * np.exp(-rate * np.maximum(idle, 0.0))).astype(np.float32)


def tier_counts(state: State, rows: np.ndarray, now: float) -> dict[str, int]:
    """How many of ``rows`` sit in each tier at ``now`` (every tier named, zeros included)."""
    tiers = {t.value: 0 for t in Tier}
    if len(rows):
        conf = decayed_confidence(state, rows, now)
        idle = (now - np.frombuffer(state.last_active, np.float64)[rows]) / DAY
        for c, d in zip(conf.tolist(), idle.tolist(), strict=True):
            tiers[tier_of(d, c).value] += 1
    return tiers
