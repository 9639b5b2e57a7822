"""Dhyana (attention): message salience, the focus window, concepts, tool attention, the
attention_shifted event and persistence."""

import json
import math

import pytest

from soul.engines.chetana import ChetanaConfig, Dhyana, StateError, extract_concepts


def recorder():
    events = []
    return events, lambda name, data: events.append((name, data))


def test_starts_with_empty_weights():
    weights = Dhyana(ChetanaConfig()).get_weights()
    assert weights.messages == {} and weights.concepts == {} and weights.tools == {}


def test_a_new_message_starts_at_salience_one():
    dhyana = Dhyana()
    dhyana.add_message("m1")
    assert dhyana.get_weights().messages == {"m1": 1.0}


def test_an_error_boosts_its_two_previous_neighbours_at_once():
    dhyana = Dhyana()
    for i in range(4):
        dhyana.add_message(f"m{i}")
    dhyana.add_message("err", has_error=True)
    messages = dhyana.get_weights().messages
    assert messages["m0"] == 1.0 and messages["m1"] == 1.0
    assert messages["m2"] == pytest.approx(1.3) and messages["m3"] == pytest.approx(1.3)
    assert messages["err"] == 1.0


def test_a_correction_starts_boosted():
    dhyana = Dhyana()
    dhyana.add_message("fix", is_correction=True)
    assert dhyana.get_weights().messages["fix"] == pytest.approx(1.5)


def test_refresh_rescores_by_recency_so_older_messages_weigh_less():
    dhyana = Dhyana()
    for i in range(5):
        dhyana.add_message(f"m{i}")
    dhyana.refresh_salience()
    messages = dhyana.get_weights().messages
    assert messages["m0"] < messages["m4"]
    assert messages["m0"] == pytest.approx(math.exp(-0.1 * 4))


def test_refresh_adds_the_error_boost_to_messages_within_two_of_an_error():
    dhyana = Dhyana()
    for i in range(6):
        dhyana.add_message(f"m{i}", has_error=(i == 2))
    dhyana.refresh_salience()
    messages = dhyana.get_weights().messages
    for i in range(6):
        expected = math.exp(-0.1 * (5 - i)) + (0.3 if i in (0, 1, 3, 4) else 0.0)
        assert messages[f"m{i}"] == pytest.approx(expected), i


def test_a_correction_stays_salient_with_half_rate_decay():
    dhyana = Dhyana()
    dhyana.add_message("fix", is_correction=True)
    for i in range(10):
        dhyana.add_message(f"m{i}")
    dhyana.refresh_salience()
    expected = math.exp(-0.1 * 10) + 0.5 * math.exp(-0.05 * 10)
    assert dhyana.get_weights().messages["fix"] == pytest.approx(expected)


def test_salience_is_clamped_to_two():
    dhyana = Dhyana(ChetanaConfig(attention_correction_boost=5.0))
    dhyana.add_message("fix", is_correction=True)
    assert dhyana.get_weights().messages["fix"] == 2.0
    dhyana.refresh_salience()
    assert dhyana.get_weights().messages["fix"] == 2.0


def test_the_focus_window_holds_exactly_k_of_thirty_messages():
    dhyana = Dhyana()
    for i in range(30):
        dhyana.add_message(f"m{i}")
    assert len(dhyana.get_focus_window()) == 20
    dhyana.refresh_salience()
    assert dhyana.get_focus_window() == [f"m{i}" for i in range(29, 9, -1)]  # newest first


def test_an_old_correction_can_stay_in_the_focus_window():
    dhyana = Dhyana(ChetanaConfig(attention_focus_window=3))
    dhyana.add_message("fix", is_correction=True)
    for i in range(4):
        dhyana.add_message(f"m{i}")
    dhyana.refresh_salience()
    assert "fix" in dhyana.get_focus_window()


def test_message_history_is_bounded_to_twice_the_focus_window():
    dhyana = Dhyana(ChetanaConfig(attention_focus_window=5))
    for i in range(50):
        dhyana.add_message(f"m{i}", has_error=(i % 7 == 0), is_correction=(i % 11 == 0))
    dhyana.refresh_salience()
    messages = dhyana.get_weights().messages
    assert list(messages) == [f"m{i}" for i in range(40, 50)]
    assert all(0.0 <= s <= 2.0 for s in messages.values())


def test_error_adjacency_survives_dropping_old_messages():
    # Adjacency kept incrementally must equal a fresh computation over the kept messages.
    dhyana = Dhyana(ChetanaConfig(attention_focus_window=2))  # keeps 4 messages
    flags = [True, False, False, True, False, False, False]
    for i, err in enumerate(flags):
        dhyana.add_message(f"m{i}", has_error=err)
    dhyana.refresh_salience()
    kept = flags[-4:]
    for j, salience in enumerate(dhyana.get_weights().messages.values()):
        near = any(kept[k] for k in range(max(0, j - 2), min(4, j + 3)) if k != j)
        assert salience == pytest.approx(math.exp(-0.1 * (3 - j)) + (0.3 if near else 0.0))


def test_flagging_the_latest_message_applies_the_boosts():
    dhyana = Dhyana()
    for i in range(3):
        dhyana.add_message(f"m{i}")
    dhyana.flag_latest_message(error=True, correction=True)
    dhyana.flag_latest_message(error=True)  # already flagged: no double boost
    messages = dhyana.get_weights().messages
    assert messages == pytest.approx({"m0": 1.3, "m1": 1.3, "m2": 1.5})


def test_a_success_raises_tool_attention_by_performance_times_a_tenth():
    dhyana = Dhyana()
    dhyana.on_tool_used("grep", True, 0.8)
    assert dhyana.tools["grep"] == pytest.approx(0.58)


def test_a_failure_lowers_tool_attention_by_five_hundredths():
    dhyana = Dhyana()
    dhyana.on_tool_used("bash", False, 0.0)
    assert dhyana.tools["bash"] == pytest.approx(0.45)


def test_tool_attention_stays_in_unit_interval():
    dhyana = Dhyana()
    for _ in range(30):
        dhyana.on_tool_used("read", True, 1.0)
        dhyana.on_tool_used("bash", False, 0.0)
    assert dhyana.tools == {"read": 1.0, "bash": 0.0}


def test_concepts_are_lowercase_keywords_of_four_or_more_characters():
    dhyana = Dhyana()
    dhyana.track_concepts("Implement authentication system with JWT tokens")
    assert dhyana.concepts == pytest.approx(
        {"implement": 0.1, "authentication": 0.1, "system": 0.1, "tokens": 0.1}
    )


def test_concept_extraction_strips_punctuation_inside_words_and_dedupes():
    assert extract_concepts("Auth-token, AUTH-TOKEN! the: (parser)") == ["authtoken", "parser"]


def test_stop_words_alone_give_no_concepts():
    dhyana = Dhyana()
    dhyana.track_concepts("the this that with from have been")
    assert dhyana.concepts == {}


def test_concept_weight_grows_by_a_tenth_per_message_and_caps_at_one():
    dhyana = Dhyana()
    for _ in range(15):
        dhyana.track_concepts("parser parser parser")  # once per message
    assert dhyana.concepts["parser"] == 1.0
    fresh = Dhyana()
    fresh.track_concepts("parser")
    fresh.track_concepts("parser")
    assert fresh.concepts["parser"] == pytest.approx(0.2)


def test_concepts_are_capped_at_one_hundred_evicting_the_lowest():
    dhyana = Dhyana()
    dhyana.track_concepts("keepme")
    dhyana.track_concepts("keepme")
    for i in range(120):
        dhyana.track_concepts(f"uniquekeyword{i:05d}")
    assert len(dhyana.concepts) == 100
    assert "keepme" in dhyana.concepts


def test_refresh_decays_concepts_and_drops_those_reaching_zero():
    dhyana = Dhyana()
    dhyana.track_concepts("parser")
    dhyana.track_concepts("parser lexer")
    dhyana.refresh_salience()
    assert dhyana.concepts == pytest.approx({"parser": 0.15, "lexer": 0.05})
    dhyana.refresh_salience()
    assert dhyana.concepts == pytest.approx({"parser": 0.1})


def test_top_concepts_rank_by_weight_then_first_mention():
    dhyana = Dhyana()
    dhyana.track_concepts("alpha bravo charlie")
    dhyana.track_concepts("charlie")
    assert [c.name for c in dhyana.top_concepts()] == ["charlie", "alpha", "bravo"]
    assert [c.name for c in dhyana.top_concepts(1)] == ["charlie"]


def test_focus_exposes_concepts_tools_and_the_message_window():
    dhyana = Dhyana()
    dhyana.track_concepts("parser lexer")
    dhyana.on_tool_used("read", True, 0.8)
    dhyana.add_message("m0")
    focus = dhyana.focus()
    assert "parser" in focus and "nothing" not in focus
    assert list(focus) == ["parser", "lexer"]
    assert focus.tools[0].name == "read"
    assert focus.messages == ("m0",)
    assert str(focus) == "parser (0.10), lexer (0.10)"


def test_attention_shifted_fires_when_most_top_concepts_change():
    events, on_event = recorder()
    dhyana = Dhyana(on_event=on_event)
    dhyana.track_concepts("alpha bravo charlie delta echo")
    dhyana.track_concepts("alpha bravo charlie")  # same top: no event
    dhyana.refresh_salience()
    dhyana.refresh_salience()
    dhyana.track_concepts("foxtrot golf hotel india juliet")
    dhyana.track_concepts("foxtrot golf hotel india juliet")
    shifts = [data for name, data in events if name == "attention_shifted"]
    assert shifts == [
        {"concepts": ["alpha", "bravo", "charlie", "delta", "echo"], "previous": []},
        {
            "concepts": ["foxtrot", "golf", "hotel", "india", "juliet"],
            "previous": ["alpha", "bravo", "charlie", "delta", "echo"],
        },
    ]


def test_attention_shifted_does_not_fire_on_a_small_change():
    events, on_event = recorder()
    dhyana = Dhyana(on_event=on_event)
    dhyana.track_concepts("alpha bravo charlie delta echo")
    dhyana.track_concepts("alpha bravo charlie zulu")  # zulu enters, one leaves
    assert [name for name, _ in events] == ["attention_shifted"]


def test_serialize_round_trips_concepts_tools_and_announced_focus():
    dhyana = Dhyana()
    dhyana.track_concepts("implement authentication system")
    dhyana.on_tool_used("grep", True, 0.9)
    dhyana.on_tool_used("read", False, 0.0)
    dhyana.add_message("m0")
    state = json.loads(json.dumps(dhyana.serialize()))
    restored = Dhyana.deserialize(state, ChetanaConfig())
    assert restored.concepts == dhyana.concepts
    assert restored.tools == dhyana.tools
    assert restored.serialize() == dhyana.serialize()
    assert restored.get_weights().messages == {}  # salience is ephemeral


def test_deserialize_names_the_bad_value():
    with pytest.raises(StateError, match=r"attention\.concepts\.parser"):
        Dhyana.deserialize({"concepts": {"parser": "high"}, "tools": {}})
    with pytest.raises(StateError, match=r"attention\.tools is missing"):
        Dhyana.deserialize({"concepts": {}})


def test_focus_rankings_answer_by_name_like_a_dict():
    dhyana = Dhyana()
    dhyana.track_concepts("parser lexer")
    dhyana.track_concepts("parser")
    concepts = dhyana.focus().concepts
    assert "parser" in concepts and "nothing" not in concepts
    assert concepts["parser"] == pytest.approx(0.2)
    assert concepts[0].name == "parser" and concepts.names == ("parser", "lexer")
    assert concepts.as_dict() == pytest.approx({"parser": 0.2, "lexer": 0.1})
    assert [name for name, _ in concepts] == ["parser", "lexer"]
    with pytest.raises(KeyError):
        concepts["nothing"]
