"""Energy and dreams (energy.py, memory.py) and the psyche (psyche.py): timing, promotion, flags."""

from __future__ import annotations

import random

import pytest

from soul.engines.dialogue import (
    AgentMind,
    EnergyRules,
    PsycheRules,
    defense_flags,
    drain,
    dream,
    freudian_slip,
    remember,
    self_replication,
)


def test_drain_is_uniform_8_to_15_plus_04_conflict_capped_at_30():
    rng = random.Random(3)
    drains = [drain(100.0, 0.0, 1, rng).drained for _ in range(2000)]
    assert 8.0 <= min(drains) < 8.2 and 14.8 < max(drains) <= 15.0
    step = drain(100.0, 10.0, 1, random.Random(1))
    assert step.drained == pytest.approx(random.Random(1).uniform(8, 15) + 4.0)
    assert drain(100.0, 60.0, 1, random.Random(1)).drained == 30.0  # 8..15 + 24 capped


def test_a_dream_is_due_at_or_below_35_and_every_seventh_turn():
    low = drain(40.0, 0.0, 3, random.Random(0))
    assert low.level <= 35.0 and low.dream and low.dream_reason == "low_energy"
    assert drain(100.0, 0.0, 7, random.Random(0)).dream_reason == "schedule"
    assert drain(100.0, 0.0, 6, random.Random(0)).dream is False
    assert drain(100.0, 0.0, 14, random.Random(0), EnergyRules(dream_every=0)).dream is False


def test_energy_timing_over_a_run_of_turns():
    rng, level, dreams = random.Random(5), 100.0, []
    for turn in range(1, 30):
        step = drain(level, 0.0, turn, rng)
        level = 100.0 if step.dream else step.level
        if step.dream:
            dreams.append((turn, step.dream_reason))
    # 100 minus 8..15 a turn reaches 35 on the 5th to 9th turn; turn 7's dream comes first
    assert dreams[0] in {(5, "low_energy"), (6, "low_energy"), (7, "schedule")}
    assert all(reason == "low_energy" or turn % 7 == 0 for turn, reason in dreams)


def test_hallucination_risk_only_between_35_and_60_with_p_010():
    assert not any(drain(100.0, 0.0, 1, random.Random(s)).hallucination_risk for s in range(500))
    risks = [drain(65.0, 0.0, 1, random.Random(s)) for s in range(5000)]
    share = sum(r.hallucination_risk for r in risks) / len(risks)
    assert all(35 < r.level < 60 for r in risks) and share == pytest.approx(0.10, abs=0.02)


def test_dream_integrates_forgets_empty_entries_promotes_meaningful_ones_and_recharges():
    mind = AgentMind("Athena", energy=30.0)
    remember(mind, "Justice is harmony of the soul", 1, importance=0.8)
    remember(mind, "   ", 2, importance=0.9)
    remember(mind, "Passing remark", 3, importance=0.2)
    remember(mind, "It hurts to lose", 4, importance=0.1, emotion="grief", intensity=0.7)
    report = dream(mind)
    assert report.integrated == (1, 2, 3, 4)
    assert report.forgotten == 2  # the blank entry, from STM and from conscious memory
    assert report.promoted == (1, 4)  # importance >= 0.5, or intensity >= 0.6; never the blank one
    assert (report.energy_before, report.energy_after, mind.energy) == (30.0, 100.0, 100.0)
    assert [e.source for e in mind.ltm] == ["dream", "dream"]
    assert dream(mind).integrated == ()  # nothing new to integrate


def test_defense_flags():
    assert defense_flags("calm words", "fear", 0.8) == (True, False)
    assert defense_flags("calm words", "fear", 0.75) == (False, False)  # more than 0.75
    assert defense_flags("calm words", "joy", 0.99) == (False, False)
    assert defense_flags("a dangerous idea", None, 0.0) == (False, True)
    assert defense_flags("secretly, nothing", None, 0.0) == (False, False)  # whole words only
    mind = AgentMind("A")
    assert remember(mind, "a secret", 1, psyche=PsycheRules(defense=False)).flagged is False


def test_freudian_slip_promotes_a_flagged_memory_with_p_015():
    slips = 0
    for seed in range(4000):
        mind = AgentMind("Socrates")
        remember(mind, "plain thought", 1)
        remember(mind, "the secret fear", 2)
        slip = freudian_slip(mind, random.Random(seed))
        if slip:
            slips += 1
            assert slip.text == "[SLIP] the secret fear"
            assert slip.entry.source == "freudian_slip" and mind.ltm == [slip.entry]
    assert slips / 4000 == pytest.approx(0.15, abs=0.02)


def test_freudian_slip_needs_a_flagged_memory_and_its_switch():
    mind = AgentMind("Socrates")
    remember(mind, "plain thought", 1)
    assert all(freudian_slip(mind, random.Random(s)) is None for s in range(200))
    remember(mind, "a secret", 2)
    assert all(freudian_slip(mind, random.Random(s), PsycheRules(slip=False)) is None for s in range(200))


def test_self_replication_every_ten_turns_promotes_the_top_three_recurring():
    mind = AgentMind("Athena")
    remember(mind, "rivers carry memory", 1, importance=0.3)
    remember(mind, "rivers and bridges", 2, importance=0.9)
    remember(mind, "bridges span gaps", 3, importance=0.6)
    remember(mind, "memory fades slowly", 4, importance=0.8)
    remember(mind, "unique lonely words", 5, importance=1.0)  # shares nothing: never promoted
    assert self_replication(mind, 9) == ()
    promoted = self_replication(mind, 10)
    assert [p.entry.content for p in promoted] == ["rivers and bridges", "memory fades slowly", "bridges span gaps"]
    assert all(p.marker == "[SELF-REPL]" and p.entry.source == "self_replication" for p in promoted)
    assert promoted[0].text == "[SELF-REPL] rivers and bridges"
    assert self_replication(mind, 20, PsycheRules(self_replication=False)) == ()
