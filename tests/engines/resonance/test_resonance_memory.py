"""The memory model: the seed's 26 kinds, decay rates, Bayesian confidence, tiers, the gate."""

from __future__ import annotations

import pytest

from soul.engines.resonance import DECAY_RATES, Confidence, ConfigError, Kind, Tier
from soul.engines.resonance.memory import DAY, Memory, gate_reason, parse_kind, tier_of


def test_the_seeds_26_kinds_in_its_order() -> None:
    assert len(Kind) == 26
    assert Kind(0) is Kind.WISDOM and Kind(3) is Kind.EPISODE and Kind(25) is Kind.PATTERN_STATE
    assert Kind.PROJECT_ESSENCE.label == "project_essence"


def test_parse_kind_accepts_what_users_write() -> None:
    assert parse_kind("episode") is Kind.EPISODE
    assert parse_kind("Project-Essence") is Kind.PROJECT_ESSENCE
    assert parse_kind(8) is Kind.CORRECTION
    with pytest.raises(ConfigError, match="the kinds are: wisdom, belief"):
        parse_kind("feeling")


def test_the_seeds_decay_rates() -> None:
    assert DECAY_RATES[Kind.BELIEF] == DECAY_RATES[Kind.SYMBOL] == 0.0
    assert DECAY_RATES[Kind.WISDOM] == DECAY_RATES[Kind.CORRECTION] == 0.005
    assert DECAY_RATES[Kind.PREFERENCE] == 0.01
    assert DECAY_RATES[Kind.EPISODE] == 0.03
    assert set(DECAY_RATES) == set(Kind)


def test_observations_move_the_mean_and_shrink_the_variance() -> None:
    c = Confidence()
    up = c.observe(1.0)
    assert up.mu > c.mu and up.var < c.var and up.n == 1
    down = up.observe(0.0)
    assert down.mu < up.mu and down.var < up.var and down.n == 2
    many = c
    for _ in range(50):
        many = many.observe(1.0)
    assert many.mu == pytest.approx(1.0, abs=0.02) and many.var < 0.005


def test_decay_fades_the_mean_by_rate_and_time() -> None:
    c = Confidence(0.8, 0.01, 3)
    assert c.decay(0.0, 100) == c
    week = c.decay(0.03, 7)
    assert week.mu == pytest.approx(0.8 * 0.8106, rel=1e-3) and week.var > c.var
    assert c.decay(0.03, 30).mu < week.mu


def test_memory_decays_from_its_last_activity_and_changes_tier() -> None:
    import numpy as np

    m = Memory("a", Kind.EPISODE, "x" * 20, np.zeros(2), created=0.0, last_active=0.0,
               confidence=Confidence(0.8, 0.01, 1))
    belief = Memory("b", Kind.BELIEF, "x" * 20, np.zeros(2), confidence=Confidence(0.8, 0.01, 1))
    assert m.tier(now=3600) is Tier.HOT
    assert m.tier(now=3 * DAY) is Tier.WARM
    assert m.tier(now=10 * DAY) is Tier.COOL
    assert m.tier(now=40 * DAY) is Tier.COLD
    assert m.confidence_at(10 * DAY).mu < 0.8
    assert belief.confidence_at(1000 * DAY).mu == 0.8


def test_tier_thresholds() -> None:
    assert tier_of(0.5, 0.05) is Tier.COLD  # faded confidence is cold however recent


def test_gate_refuses_short_text() -> None:
    assert gate_reason("too short") == "too short: 9 < 10 characters"
    assert gate_reason("   ok ok ok ok   ") is None
