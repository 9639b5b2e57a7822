"""Emotions without a model (the lexicon detector), the drives they move, and what they make
fire: the seed rule "last emotion anger or frustration → agree_and_expand" and the defense
mechanism's `intrusive` flag."""

from __future__ import annotations

import random
import time

import pytest

from soul.engines.dialogue import (
    AgentMind,
    Drives,
    Emotion,
    PsycheRules,
    SeedRequest,
    Turn,
    choose_seed,
    conflict_index,
    defense_flags,
    detect_emotion,
    remember,
    response_kind,
    update_drives,
)


@pytest.mark.parametrize(("text", "emotion", "intensity"), [
    ("I am angry about this.", "anger", 0.6),
    ("This is so frustrating.", "frustration", 0.9),  # 0.6 intensified 1.5 times
    ("I am terrified of what comes next.", "fear", 0.8),
    ("I feel ashamed.", "shame", 0.6),
    ("I feel guilty for it!", "guilt", 0.7),  # 0.6 + 0.1 for one "!"
    ("Honestly, I am anxious and worried.", "anxiety", 1.0),  # 0.6 + 0.6, held to 1
    ("What a delightful thought.", "joy", 0.8),
    ("Justice is a relation between persons.", "neutral", 0.0),
])
def test_each_emotion_is_found_with_its_intensity(text: str, emotion: str, intensity: float) -> None:
    found = detect_emotion(text)
    assert (found.name, found.intensity) == (emotion, pytest.approx(intensity))


def test_only_whole_words_count() -> None:
    # "fearless" holds "fear", "madness" "mad", "angrily"… none is a lexicon word
    assert detect_emotion("A fearless scholar studies the shameless, guiltless madness.") == Emotion("neutral", 0.0)


def test_a_negated_word_does_not_count_unless_a_contrast_comes_between() -> None:
    assert detect_emotion("I am not afraid of the question.").name == "neutral"
    assert detect_emotion("I don't feel guilty at all.").name == "neutral"
    assert detect_emotion("I don\u2019t feel guilty.").name == "neutral"  # a typographic apostrophe
    found = detect_emotion("I am not afraid, but furious.")
    assert (found.name, found.intensity, found.cues) == ("anger", 0.8, ("furious",))


def test_the_strongest_emotion_wins_and_ties_go_by_the_lexicon_order() -> None:
    assert detect_emotion("I am afraid, angry and furious.").name == "anger"  # 0.6 + 0.8 against 0.6
    assert detect_emotion("I am afraid and angry.").name == "anger"  # 0.6 each: anger is listed first


def test_detection_is_linear_in_the_text() -> None:
    text = "We are not afraid but we are angry, worried and glad. " * 4000  # about 220 KB
    start = time.perf_counter()
    found = detect_emotion(text)
    assert time.perf_counter() - start < 2.0
    assert found.name == "anger" and found.intensity == 1.0


def test_anger_or_frustration_in_the_last_turn_makes_the_seed_agree_and_expand() -> None:
    history = (Turn("Socrates", "You are wrong, and I am furious about it!", emotion="anger"),)
    assert choose_seed(SeedRequest("justice", history, "Athena", 3), random.Random(0)).strategy == "agree_and_expand"
    calm = (Turn("Socrates", "You are wrong.", emotion="neutral"),)
    drawn = {choose_seed(SeedRequest("justice", calm, "Athena", 3), random.Random(s)).strategy for s in range(40)}
    assert len(drawn) > 2  # the weighted draw, not the rule


def test_an_intense_painful_emotion_makes_the_memory_intrusive() -> None:
    mind = AgentMind("Socrates")
    furious = detect_emotion("I am absolutely furious!")  # 0.8 × 1.5 + 0.1, held to 1
    entry = remember(mind, "I am absolutely furious!", 1, emotion=furious.name, intensity=furious.intensity)
    assert entry.intrusive and not entry.suppressed
    mild = detect_emotion("I am annoyed.")  # anger at 0.4: not past 0.75
    assert not remember(mind, "I am annoyed.", 2, emotion=mild.name, intensity=mild.intensity).intrusive
    joyful = detect_emotion("I am absolutely thrilled!")  # intense, but not a painful emotion
    assert defense_flags("x", joyful.name, joyful.intensity, PsycheRules()) == (False, False)


def test_drives_move_by_the_response_kind_and_the_emotion() -> None:
    start = Drives(id=4, ego=7, superego=6, self_awareness=0.7)  # conflict |4−7| + |6−7| = 4
    # reflective (neutral, intensity 0): id − 0.06, ego + 0.05 + 0.06, superego + 0.08, awareness + 0.03
    assert update_drives(start, "neutral", 0.0) == Drives(3.94, 7.11, 6.08, 0.73)
    # aggressive (anger at 0.9): id + 0.18 + 0.09 + 0.10, superego − 0.08, ego + 0.05 − 0.06, awareness + 0.01
    angry = update_drives(start, "anger", 0.9)
    assert angry == Drives(4.37, 6.99, 5.92, 0.71)
    assert conflict_index(angry) == pytest.approx(2.62 + 1.07)
    # guilt (fear at 0.5): superego + 0.20 + 0.05 + 0.08, id − 0.08, ego + 0.05, awareness + 0.04
    assert update_drives(start, "fear", 0.5) == Drives(3.92, 7.05, 6.33, 0.74)
    # a conflict index of 8.5 or more makes any turn aggressive
    assert response_kind("joy", 8.5) == "aggressive" and response_kind("joy", 8.4) == "reflective"
    # held to their scales; an explicit conflict stays
    top = update_drives(Drives(10, 10, 0, 1.0, conflict=3.0), "anger", 1.0)
    assert (top.id, top.ego, top.superego, top.self_awareness, conflict_index(top)) == (10.0, 9.94, 0.0, 1.0, 3.0)


def test_the_seed_rule_reads_the_last_emotion_past_fixys_turns() -> None:
    history = (Turn("Socrates", "I am furious!", emotion="anger", intensity=0.9),
               Turn("Fixy", "Let us slow down.", is_fixy=True))  # the observer's turn carries no emotion
    assert choose_seed(SeedRequest("justice", history, "Athena", 3), random.Random(0)).strategy == "agree_and_expand"
