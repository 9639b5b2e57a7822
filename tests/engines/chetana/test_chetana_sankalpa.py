"""Sankalpa (intention): goal extraction at word boundaries, compound goals, dedupe and
escalation, progress from whole-word keyword matches, staleness, capacity, FNV-1a ids."""

import json

import pytest

from soul.engines.chetana import (
    ChetanaConfig,
    CognitivePriors,
    Sankalpa,
    StateError,
    extract_goals,
    fnv1a_32,
    intention_id,
    normalize_goal,
)
from soul.engines.chetana.goals import INTENT_PATTERNS, word_overlap


def recorder():
    events = []
    return events, lambda name, data: events.append((name, data))


def test_starts_with_no_intentions():
    sankalpa = Sankalpa(ChetanaConfig())
    assert sankalpa.get_intentions() == [] and sankalpa.get_active_intentions() == []


def test_i_want_to_creates_an_active_intention():
    created = Sankalpa().extract_from_message("I want to add authentication")
    assert [i.goal for i in created] == ["add authentication"]
    assert created[0].status == "active" and created[0].priority == "normal"
    assert created[0].progress == 0.0 and created[0].mention_count == 1


def test_lets_keeps_the_verb_in_the_goal():
    created = Sankalpa().extract_from_message("Let's refactor the database layer")
    assert created[0].goal == "refactor the database layer"


def test_fix_the_extracts_the_object():
    created = Sankalpa().extract_from_message("fix the login bug")
    assert created[0].goal == "login bug"


def test_implement_keeps_the_original_case():
    created = Sankalpa().extract_from_message("implement OAuth2 support")
    assert created[0].goal == "OAuth2 support"


@pytest.mark.parametrize(
    ("message", "goal"),
    [
        ("I want to ship it", "ship it"),
        ("let's ship it", "ship it"),
        ("Let us ship it", "ship it"),
        ("The goal is shipping v2", "shipping v2"),
        ("we need to ship it", "ship it"),
        ("fix the flaky test", "flaky test"),
        ("add a retry loop", "retry loop"),
        ("add an index", "index"),
        ("implement caching", "caching"),
        ("create a parser", "parser"),
        ("build a dashboard", "dashboard"),
        ("write a changelog", "changelog"),
        ("remove dead code", "dead code"),
        ("delete old branches", "old branches"),
        ("update the readme", "the readme"),
        ("change the colour", "the colour"),
        ("make tests faster", "tests faster"),
        ("refactor storage", "storage"),
        ("Let’s ship it", "ship it"),
    ],
)
def test_each_intent_phrase_signals_a_goal(message, goal):
    assert extract_goals(message) == [goal]


def test_there_are_eighteen_intent_phrases():
    assert len(INTENT_PATTERNS) == 18


def test_a_goal_ends_at_sentence_punctuation_or_a_comma():
    assert extract_goals("Please fix the parser, then rest. Fine!") == ["parser"]


def test_phrases_inside_words_do_not_fire():
    # The original matched substrings: "exchange " fired "change ", "remake " fired "make ".
    assert extract_goals("the exchange rate is fine") == []
    assert extract_goals("a remake of the film") == []
    assert extract_goals("unfix the sprite") == []
    assert extract_goals("the exchange rate; change the label") == ["the label"]


def test_plain_conversation_gives_no_intentions():
    assert Sankalpa().extract_from_message("hello, how are you?") == []


def test_compound_goals_split_at_and():
    created = Sankalpa().extract_from_message("implement auth and add tests")
    assert [i.goal for i in created] == ["auth", "add tests"]


def test_a_similar_goal_is_a_re_mention_not_a_new_intention():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("implement authentication system")
    assert sankalpa.extract_from_message("implement authentication system") == []
    [intention] = sankalpa.get_intentions()
    assert intention.mention_count == 2


def test_dedupe_uses_the_overlap_coefficient():
    assert word_overlap("authentication system", "the new authentication module") == 0.5
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("implement authentication system")
    sankalpa.extract_from_message("implement the new authentication module")
    assert len(sankalpa.get_intentions()) == 1


def test_three_mentions_make_a_goal_high_and_five_critical():
    events, on_event = recorder()
    sankalpa = Sankalpa(on_event=on_event)
    for _ in range(3):
        sankalpa.extract_from_message("implement authentication")
    assert sankalpa.get_intentions()[0].priority == "high"
    for _ in range(2):
        sankalpa.extract_from_message("implement authentication")
    assert sankalpa.get_intentions()[0].priority == "critical"
    changes = [data for name, data in events if name == "goal_changed"]
    assert [c["priority"] for c in changes] == ["high", "critical"]


def test_one_message_counts_as_one_mention():
    # "Let's fix the login bug" matches both "let's " and "fix the "; the original counted
    # that as two mentions and escalated on the second message.
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("Let's fix the login bug")
    [intention] = sankalpa.get_intentions()
    assert intention.goal == "fix the login bug" and intention.mention_count == 1
    sankalpa.extract_from_message("Let's fix the login bug")
    assert sankalpa.get_intentions()[0].mention_count == 2


def test_a_matching_tool_result_advances_progress():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("implement authentication system")
    sankalpa.on_tool_result("edit", "added authentication system module with login handler")
    [intention] = sankalpa.get_active_intentions()
    assert intention.progress == pytest.approx(0.1)
    assert intention.evidence == ("edit",) and intention.stale_turns == 0


def test_an_unrelated_result_does_not_advance():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("implement authentication system")
    sankalpa.on_tool_result("grep", "found 3 config files")
    assert sankalpa.get_active_intentions()[0].progress == 0.0


def test_keywords_match_whole_words_not_parts_of_words():
    # The original's substring test counted "bug" in "debugging" and "login" in "loginx".
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("fix the login bug")
    sankalpa.on_tool_result("bash", "debugging loginx flow")
    assert sankalpa.get_active_intentions()[0].progress == 0.0
    sankalpa.on_tool_result("bash", "Login-bug reproduced")
    assert sankalpa.get_active_intentions()[0].progress == pytest.approx(0.1)


def test_plural_forms_match_their_keyword():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("we need to add integration tests for parsers")
    sankalpa.on_tool_result("bash", "integration test for the parser passed")
    assert sankalpa.get_active_intentions()[0].progress == pytest.approx(0.1)


def test_a_single_keyword_goal_can_progress():
    # With the original's fixed threshold of two, "fix the tests" could never advance.
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("fix the tests")
    sankalpa.on_tool_result("bash", "all tests pass")
    assert sankalpa.get_active_intentions()[0].progress == pytest.approx(0.1)


def test_progress_reaches_exactly_one_and_evidence_is_capped():
    sankalpa = Sankalpa(ChetanaConfig(max_evidence_per_intention=3))
    sankalpa.extract_from_message("implement authentication system")
    for _ in range(12):
        sankalpa.on_tool_result("edit", "authentication system")
    [intention] = sankalpa.get_active_intentions()
    assert intention.progress == 1.0
    assert intention.evidence == ("edit", "edit", "edit")


def test_each_turn_without_progress_counts_as_stale():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("implement authentication")
    for _ in range(3):
        sankalpa.end_turn()
    assert sankalpa.get_active_intentions()[0].stale_turns == 3


def test_a_goal_pauses_after_fifteen_stale_turns_and_is_abandoned_after_thirty():
    events, on_event = recorder()
    sankalpa = Sankalpa(on_event=on_event)
    [created] = sankalpa.extract_from_message("implement authentication")
    for _ in range(14):
        sankalpa.end_turn()
    assert sankalpa.get_intentions()[0].status == "active"
    sankalpa.end_turn()
    assert sankalpa.get_intentions()[0].status == "paused"
    for _ in range(14):
        sankalpa.end_turn()
    assert sankalpa.get_intentions()[0].status == "paused"
    sankalpa.end_turn()
    assert sankalpa.get_intentions()[0].status == "abandoned"
    assert events == [
        ("goal_created", {"id": created.id, "goal": "authentication"}),
        ("goal_changed", {"id": created.id, "status": "paused"}),
        ("goal_changed", {"id": created.id, "status": "abandoned"}),
    ]


def test_goal_orientedness_changes_the_patience():
    sankalpa = Sankalpa(priors=CognitivePriors(goal_orientedness=0.0))  # pause after 8
    sankalpa.extract_from_message("implement authentication")
    for _ in range(8):
        sankalpa.end_turn()
    assert sankalpa.get_intentions()[0].status == "paused"


def test_mentioning_a_paused_goal_wakes_it():
    events, on_event = recorder()
    sankalpa = Sankalpa(on_event=on_event)
    sankalpa.extract_from_message("implement authentication")
    for _ in range(15):
        sankalpa.end_turn()
    sankalpa.extract_from_message("implement authentication")
    [intention] = sankalpa.get_intentions()
    assert intention.status == "active" and intention.stale_turns == 0
    assert events[-1] == ("goal_changed", {"id": intention.id, "status": "active"})


def test_re_mentioning_an_active_goal_is_not_a_status_change():
    events, on_event = recorder()
    sankalpa = Sankalpa(on_event=on_event)
    sankalpa.extract_from_message("implement authentication")
    sankalpa.extract_from_message("implement authentication")
    assert [name for name, _ in events] == ["goal_created"]


def test_achieve_marks_a_goal_done():
    events, on_event = recorder()
    sankalpa = Sankalpa(on_event=on_event)
    sankalpa.extract_from_message("implement authentication")
    goal_id = sankalpa.get_active_intentions()[0].id
    assert sankalpa.achieve(goal_id) is True
    assert sankalpa.get(goal_id).status == "achieved" and sankalpa.get(goal_id).progress == 1.0
    assert sankalpa.achieve("nope") is False
    assert events[-1] == ("goal_changed", {"id": goal_id, "status": "achieved"})


def test_intentions_are_capped_at_max_intentions():
    sankalpa = Sankalpa()
    for i in range(15):
        sankalpa.extract_from_message(f"implement feature{i:04d}")
    assert len(sankalpa.get_intentions()) == 10


def test_capacity_evicts_the_lowest_status_then_priority_then_the_newest():
    sankalpa = Sankalpa(ChetanaConfig(max_intentions=3))
    sankalpa.extract_from_message("implement alpha")
    sankalpa.extract_from_message("implement bravo")
    sankalpa.extract_from_message("implement charlie")
    sankalpa.achieve(sankalpa.get_intentions()[0].id)  # alpha achieved: ranks below active
    sankalpa.extract_from_message("implement delta")
    assert [i.goal for i in sankalpa.get_intentions()] == ["bravo", "charlie", "delta"]
    sankalpa.extract_from_message("implement echo")  # all active normal: newest goes
    assert [i.goal for i in sankalpa.get_intentions()] == ["bravo", "charlie", "echo"]


def test_goal_created_fires_for_each_new_goal():
    events, on_event = recorder()
    sankalpa = Sankalpa(on_event=on_event)
    sankalpa.extract_from_message("implement auth and add tests")
    assert [data["goal"] for name, data in events if name == "goal_created"] == [
        "auth",
        "add tests",
    ]


def test_fnv1a_matches_the_published_test_vectors():
    assert fnv1a_32("") == 0x811C9DC5
    assert fnv1a_32("a") == 0xE40C292C
    assert fnv1a_32("foobar") == 0xBF9CF968


def test_ids_are_fnv1a_of_the_normalized_goal_in_lowercase_hex():
    [created] = Sankalpa().extract_from_message("implement OAuth2   Support")
    assert created.goal == "OAuth2 Support"
    assert normalize_goal(created.goal) == "oauth2 support"
    assert created.id == format(fnv1a_32("oauth2 support"), "x") == intention_id("oauth2 support")
    assert created.id == created.id.lower()


def test_serialize_round_trips_every_intention():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("implement authentication system")
    sankalpa.extract_from_message("fix the login bug")
    sankalpa.on_tool_result("edit", "login bug fixed")
    sankalpa.end_turn()
    state = json.loads(json.dumps(sankalpa.serialize()))
    restored = Sankalpa.deserialize(state, ChetanaConfig())
    assert restored.get_intentions() == sankalpa.get_intentions()
    assert restored.serialize() == sankalpa.serialize()
    assert restored.get_intentions()[0].status == "active"


def test_deserialize_rejects_bad_intentions_with_their_path():
    good = Sankalpa()
    good.extract_from_message("implement alpha")
    state = good.serialize()
    with pytest.raises(StateError, match=r"intentions\[0\]\.status"):
        Sankalpa.deserialize([{**state[0], "status": "dreaming"}])
    with pytest.raises(StateError, match="appears twice"):
        Sankalpa.deserialize(state + state)


def test_a_keyword_and_its_plural_count_once():
    sankalpa = Sankalpa()
    sankalpa.extract_from_message("we need to add integration tests")
    sankalpa.on_tool_result("bash", "test tests")  # one keyword twice, not two keywords
    assert sankalpa.get_active_intentions()[0].progress == 0.0


def test_phrases_joined_to_a_word_by_punctuation_still_count():
    assert extract_goals("x-fix the bug") == ["bug"]
    assert extract_goals("(implement caching)") == ["caching)"]
    assert extract_goals("nothing to see here") == []
