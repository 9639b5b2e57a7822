"""Fixy's detectors (engines/dialogue/fixy.py): each fires on a transcript built for it and
stays quiet on a healthy one."""

from __future__ import annotations

import pytest
from entelgia_transcripts import (
    bag_of_words,
    circular,
    conflictual,
    deep_without_synthesis,
    healthy,
    shallow,
    substring_lookalikes,
)

from soul.engines.dialogue import (
    DETECTORS,
    RulesError,
    Turn,
    detect,
    intervention_prompt,
    scan,
    trim_intervention,
)


def fired(turns, turn=None, **context):
    return [d.reason for d in scan(turns, turn, **context).fired]


def test_a_healthy_dialogue_draws_no_intervention():
    for n in range(1, 30):
        assert detect(healthy(n), n) is None, n


def test_nothing_fires_before_turn_three():
    assert detect(circular(10), 2) is None
    assert scan(circular(10), 2).off["circular_reasoning"] == "before turn 3"


def test_circular_reasoning_needs_four_turns_and_three_similar_pairs():
    assert detect(circular(3), 3) is None
    found = detect(circular(4), 4)
    assert found.reason == "circular_reasoning"
    assert found.evidence == {"turns": 4, "pairs": 6, "similar_pairs": 6, "max_similarity": 1.0}
    # two repeated turns among healthy ones: one similar pair, not three
    assert "circular_reasoning" not in fired([*healthy(4), *circular(2)], 6)


def test_high_conflict_from_turn_six_with_whole_word_markers():
    assert "high_conflict" not in fired(conflictual(5), 5)
    found = detect(conflictual(6), 6)
    assert found.reason == "high_conflict"
    assert found.evidence["conflict_share"] == 1.0
    # "know", "butter", "nobody", "errors": markers only as substrings
    assert "high_conflict" not in fired(substring_lookalikes(8), 8)
    # 6 of 10 is not more than 60%
    assert "high_conflict" not in fired([*conflictual(6), *healthy(4, start=6)], 10)
    assert "high_conflict" in fired([*conflictual(7), *healthy(3, start=7)], 10)


def test_shallow_discussion_from_turn_ten():
    assert "shallow_discussion" not in fired(shallow(9), 9)
    found = detect(shallow(10), 10)
    assert found.reason == "shallow_discussion"
    assert found.evidence["depth_share"] == 0.0 and found.evidence["mean_length"] < 150


def test_synthesis_opportunity_from_turn_five_when_the_last_three_lack_a_marker():
    assert detect(deep_without_synthesis(4), 4) is None
    assert detect(deep_without_synthesis(5), 5).reason == "synthesis_opportunity"
    # one synthesis marker in the last three turns is enough
    assert detect([*deep_without_synthesis(4), *healthy(1, start=4)], 5) is None


def test_meta_reflection_after_turn_fifteen_on_multiples_of_fifteen():
    assert detect(healthy(15), 15) is None
    assert detect(healthy(30), 30).reason == "meta_reflection"
    assert detect(healthy(45), 45).reason == "meta_reflection"


def test_the_first_detector_that_fires_wins_and_the_window_is_ten_turns():
    # circular turns followed by 10 healthy ones: out of the window, so no longer circular
    assert detect([*circular(5), *healthy(10, start=5)], 15) is None
    both = [*conflictual(2), *circular(6)]  # circular and conflict-free synthesis gap
    assert fired(both, 8)[0] == "circular_reasoning"
    assert detect(both, 8).reason == "circular_reasoning"
    assert detect(both, 8, order=["synthesis_opportunity", "circular_reasoning"]).reason == "synthesis_opportunity"
    with pytest.raises(RulesError, match="unknown detector"):
        scan(both, 8, order=["nope"])


def test_topic_drift_needs_an_embedder_and_fires_far_from_the_topic():
    topic = "the ethics of artificial minds"
    on_topic = [Turn(n, f"The ethics of artificial minds demands care, {w}.") for n, w in
                (("Socrates", "surely"), ("Athena", "plainly"), ("Socrates", "indeed"))]
    off_topic = [Turn(n, t) for n, t in (("Socrates", "Sourdough bread rises overnight."),
                                           ("Athena", "Rye flour needs longer proofing."),
                                           ("Socrates", "Bakers fold dough gently."))]
    assert scan(off_topic, 3, topic=topic).off["topic_drift"] == "no embedder given: topic drift needs one"
    assert "topic_drift" not in fired(on_topic, 3, topic=topic, embedder=bag_of_words)
    found = scan(off_topic, 3, topic=topic, embedder=bag_of_words).fired
    assert [d.reason for d in found] == ["topic_drift"]
    assert found[0].evidence["distance"] > 0.6


def test_persona_collapse_when_an_agent_sounds_like_the_other():
    personas = {"Socrates": "questions definitions, asks what justice and virtue really mean",
                "Athena": "paints vivid analogies, imagines gardens, rivers and bridges"}
    distinct = [Turn("Socrates", "What does justice mean, and what is virtue?"),
                Turn("Athena", "Picture a river under bridges through gardens."),
                Turn("Socrates", "Define virtue before justice, please."),
                Turn("Athena", "Imagine gardens where rivers meet.")]
    collapsed = [*distinct[:2], Turn("Socrates", "Imagine gardens and rivers, vivid analogies and bridges."),
                 distinct[1], Turn("Socrates", "Picture bridges over rivers, gardens everywhere.")]
    assert "persona_collapse" not in fired(distinct, 4, personas=personas)
    assert "persona_collapse" not in fired(distinct, 4, personas=personas, embedder=bag_of_words)
    for embedder in (None, bag_of_words):
        found = [d for d in scan(collapsed, 5, personas=personas, embedder=embedder).fired
                 if d.reason == "persona_collapse"]
        assert found and found[0].detail == "Socrates sounds like Athena"
        assert found[0].evidence["other_similarity"] > found[0].evidence["own_similarity"]
    assert scan(distinct, 4).off["persona_collapse"].startswith("no personas given")


def test_a_detection_carries_the_prompt_with_the_last_six_turns_and_the_fallback():
    turns = circular(8)
    found = detect(turns, 8)
    assert found.prompt.startswith(found.instruction)
    assert found.prompt.count("Consciousness emerges") == 6
    assert found.prompt.endswith("Respond as the observer in 2-4 sentences, at most 150 words.")
    assert found.fallback and found.to_dict()["reason"] == "circular_reasoning"
    assert set(DETECTORS) == {"circular_reasoning", "high_conflict", "shallow_discussion", "synthesis_opportunity",
                              "meta_reflection", "topic_drift", "persona_collapse"}
    assert intervention_prompt("Do X.", []).startswith("Do X.\n\nRecent dialogue:\n(no turns yet)")


def test_dict_turns_are_accepted_and_fixy_inferred_from_the_speaker():
    turns = [{"role": "Socrates", "text": t.text} for t in circular(4)]
    assert detect(turns, 4).reason == "circular_reasoning"


def test_trim_keeps_four_sentences_and_150_words():
    text = "One. Two! Three? Four. Five. Six."
    assert trim_intervention(text) == "One. Two! Three? Four."
    long = " ".join(["word"] * 400) + "."
    assert len(trim_intervention(long).split()) == 150
    assert trim_intervention("No final stop") == "No final stop"
    assert trim_intervention("  spaced \n out.  ") == "spaced out."


def test_window_and_min_turn_override_the_rules():
    assert detect(circular(4), 4, min_turn=5) is None
    # a window of 3 turns is too short for circular reasoning (needs 4)
    assert "circular_reasoning" not in fired(circular(6), 6, window=3)


def test_persona_collapse_when_an_agent_converges_on_the_others_recent_turns():
    # no personas needed: Athena's last turns take up Socrates' own words
    socrates = ["Justice requires impartial judges weighing evidence.", "Virtue demands patient courage under pressure."]
    converged = [Turn("Socrates", socrates[0]), Turn("Athena", "Picture gardens where rivers meet."),
                 Turn("Socrates", socrates[1]), Turn("Athena", socrates[0] + " " + socrates[1])]
    found = [d for d in scan(converged, 4).fired if d.reason == "persona_collapse"]
    # keywords: Socrates' two turns hold 12, Athena's last two 12 + {picture, gardens, where,
    # rivers} = 16 of which 12 shared: Jaccard 12 / 16 = 0.75 >= 0.5
    assert found and found[0].detail == "Athena converges on Socrates"
    assert found[0].evidence == {"pair_similarity": 0.75, "threshold": 0.5}
    assert "persona_collapse" not in fired(converged[:3], 4)  # Athena has one turn: nothing to compare
    distinct = [Turn("Socrates", socrates[0]), Turn("Athena", "Picture gardens where rivers meet."),
                Turn("Socrates", socrates[1]), Turn("Athena", "Imagine lanterns glowing inside windows.")]
    assert "persona_collapse" not in fired(distinct, 4)
    assert "persona_collapse" not in fired(distinct, 4, embedder=bag_of_words)
    # with an embedder, cosine >= 0.9: Athena echoing each of Socrates' turns
    echoed = [Turn("Socrates", socrates[0]), Turn("Athena", socrates[0]), Turn("Socrates", socrates[1]),
              Turn("Athena", socrates[1])]
    with_embedder = [d for d in scan(echoed, 4, embedder=bag_of_words).fired if d.reason == "persona_collapse"]
    assert with_embedder and with_embedder[0].evidence == {"pair_similarity": 1.0, "threshold": 0.9}
