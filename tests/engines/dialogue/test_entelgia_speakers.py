"""Speaker selection (engines/dialogue/speakers.py): the reference's rules and probabilities."""

from __future__ import annotations

import itertools
import random

import pytest
from entelgia_transcripts import circular, healthy

from soul.engines.dialogue import (
    RulesError,
    SpeakerRequest,
    SpeakerRules,
    Turn,
    fixy_eligibility,
    register_speaker_policy,
    repetition_detected,
    select_speaker,
    speaker_policies,
)

AGENTS = ("Socrates", "Athena")


def run(policy: str, turns: int, rules: SpeakerRules, seed: int, agents=AGENTS) -> list[str]:
    rng, history = random.Random(seed), []
    for n in range(1, turns + 1):
        name = select_speaker(SpeakerRequest(agents, tuple(history), n, rules), rng, policy)
        history.append(Turn(name, f"turn {n} says idea{n}x", is_fixy=name == rules.observer))
    return [t.speaker for t in history]


def test_turn_one_is_the_configured_first_speaker():
    assert run("entelgia", 1, SpeakerRules(), 3)[0] == "Socrates"
    assert run("entelgia", 1, SpeakerRules(first="Athena"), 3)[0] == "Athena"
    assert run("entelgia", 1, SpeakerRules(first="Nobody"), 3)[0] == "Socrates"  # unknown: the first agent


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_nobody_speaks_more_than_max_consecutive_turns_running(limit):
    agents = ("Socrates", "Athena", "Hypatia")
    for seed in range(20):
        names = run("entelgia", 200, SpeakerRules(max_consecutive=limit), seed, agents)
        longest = run_length = 1
        for a, b in itertools.pairwise(names):
            run_length = run_length + 1 if a == b else 1
            longest = max(longest, run_length)
        assert longest <= limit


def test_fixy_is_not_eligible_before_turn_four_nor_within_three_turns_of_its_last():
    history = healthy(3)
    assert fixy_eligibility(history, 3) == (False, 0.0)
    assert fixy_eligibility(history, 4) == (True, 0.20)
    with_fixy = [*healthy(2), Turn("Fixy", "Pause.", is_fixy=True), *healthy(2, start=5)]
    assert fixy_eligibility(with_fixy, 6) == (False, 0.0)  # Fixy is among the last 3 turns
    assert fixy_eligibility([*with_fixy, *healthy(1, start=9)], 7) == (True, 0.20)


def test_repetition_raises_fixys_probability_to_035():
    assert repetition_detected(circular(5))
    assert not repetition_detected(healthy(5))
    assert fixy_eligibility(circular(5), 6) == (True, 0.35)


@pytest.mark.parametrize(("history", "expected"), [(healthy(5), 0.20), (circular(5), 0.35)])
def test_fixy_share_over_5000_seeded_runs_matches_its_probability(history, expected):
    request = SpeakerRequest(AGENTS, tuple(history), 6, SpeakerRules())
    share = sum(select_speaker(request, random.Random(seed)) == "Fixy" for seed in range(5000)) / 5000
    assert share == pytest.approx(expected, abs=0.025)  # 4 standard deviations


def test_engagement_score_highest_wins_with_the_reference_formula():
    agents = ("Socrates", "Athena", "Hypatia")
    history = tuple(Turn(n, "x") for n in ("Socrates", "Athena", "Socrates", "Hypatia"))
    conflict = {"Socrates": 10.0, "Athena": 2.0}
    rules = SpeakerRules(observer=None)
    for seed in range(50):
        chosen = select_speaker(SpeakerRequest(agents, history, 5, rules, conflict), random.Random(seed))
        draws = random.Random(seed)
        scores = {
            "Socrates": (10 - 2 + 1.0) * draws.uniform(0.9, 1.2),
            "Athena": (10 - 1 + 0.2) * draws.uniform(0.9, 1.2),
            "Hypatia": (10 - 1 + 0.0) * draws.uniform(0.9, 1.2),
        }
        assert chosen == max(scores, key=scores.__getitem__)


def test_legacy_round_robin_alternates_and_fixy_speaks_every_n_turns():
    names = run("round_robin", 12, SpeakerRules(observer_every=4), seed=1)
    assert names == ["Socrates", "Athena", "Socrates", "Fixy", "Athena", "Socrates", "Athena", "Fixy",
                     "Socrates", "Athena", "Socrates", "Fixy"]


def test_same_seed_same_speakers():
    assert run("entelgia", 60, SpeakerRules(), 11) == run("entelgia", 60, SpeakerRules(), 11)
    assert run("random", 60, SpeakerRules(), 11) == run("random", 60, SpeakerRules(), 11)


def test_policies_are_replaceable_by_name():
    register_speaker_policy("always_athena", lambda request, rng: "Athena")
    try:
        assert run("always_athena", 3, SpeakerRules(), 0) == ["Athena"] * 3
    finally:
        speaker_policies.pop("always_athena")
    with pytest.raises(RulesError, match="unknown speaker policy 'nope'; known: entelgia, random, round_robin"):
        select_speaker(SpeakerRequest(AGENTS, (), 1), random.Random(0), "nope")


def test_a_policy_naming_a_stranger_is_an_error():
    with pytest.raises(RulesError, match="not in the dialogue"):
        select_speaker(SpeakerRequest(AGENTS, (), 1), random.Random(0), lambda r, g: "Mallory")
