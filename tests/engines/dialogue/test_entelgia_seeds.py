"""Seed strategies (engines/dialogue/seeds.py): the choice rules in order and the weights."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from entelgia_transcripts import healthy

from soul.engines.dialogue import (
    SEED_STRATEGIES,
    STRATEGY_INSTRUCTIONS,
    STRATEGY_WEIGHTS,
    RulesError,
    Seed,
    SeedRequest,
    Turn,
    choose_seed,
    choose_strategy,
    register_seed_strategy,
    seed_strategies,
)


def test_the_rules_apply_in_the_reference_order():
    rng = random.Random(0)
    history = healthy(3)
    assert choose_strategy([], 7, 9.0, "anger", rng) == "constructive_disagree"  # no turns first
    assert choose_strategy(history, 14, 9.0, "anger", rng) == "meta_reflect"  # then turn % 7
    assert choose_strategy(history, 5, 8.5, "anger", rng) == "synthesize"  # then conflict > 8
    assert choose_strategy(history, 5, 8.0, "Frustration", rng) == "agree_and_expand"  # then emotion


def test_the_last_emotion_is_read_from_the_history():
    history = (*healthy(2), Turn("Athena", "Enough!", emotion="anger"))
    seed = choose_seed(SeedRequest("virtue", history, "Socrates", 4), random.Random(0))
    assert seed.strategy == "agree_and_expand"
    assert seed.instruction == "TOPIC: virtue\n" + STRATEGY_INSTRUCTIONS["agree_and_expand"]


def test_the_weighted_draw_follows_the_reference_weights():
    rng = random.Random(42)
    history = healthy(1)
    counts = Counter(choose_strategy(history, 5, 0.0, None, rng) for _ in range(20000))
    for name, weight in zip(SEED_STRATEGIES, STRATEGY_WEIGHTS, strict=True):
        assert counts[name] / 20000 == pytest.approx(weight, abs=0.015)


def test_seeds_reproduce_from_the_rng_seed():
    def seeds(seed):
        rng = random.Random(seed)
        return [choose_seed(SeedRequest("t", tuple(healthy(1)), "A", n), rng).strategy for n in range(1, 40)]
    assert seeds(5) == seeds(5)


def test_static_seed_for_legacy_and_custom_strategies_by_name():
    assert choose_seed(SeedRequest("t", (), "A", 3), random.Random(0), "static").strategy == "static"
    register_seed_strategy("always_ask", lambda request, rng: Seed("always_ask", "Ask one question."))
    try:
        assert choose_seed(SeedRequest("t", (), "A", 1), random.Random(0), "always_ask").instruction == "Ask one question."
    finally:
        seed_strategies.pop("always_ask")
    with pytest.raises(RulesError, match="unknown seed strategy"):
        choose_seed(SeedRequest("t", (), "A", 1), random.Random(0), "nope")
