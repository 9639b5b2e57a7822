"""Entity extraction without an LLM: names, code identifiers, noun phrases, stop words."""

from __future__ import annotations

import pytest

from soul.engines.resonance.graph.entities import (
    PhraseCounter,
    extract_entities,
    normalise,
    noun_phrases,
)


@pytest.mark.parametrize(("text", "want"), [
    ("Caroline Smith went to the LGBTQ support group yesterday. The group was great!",
     ["Caroline Smith", "LGBTQ"]),
    ("Yesterday I met Melanie at the Museum of Modern Art in New York.",
     ["Melanie", "Museum of Modern Art", "New York"]),
    ("Hey Mel! How are you? I'm going to Paris on Monday with John.", ["Mel", "Paris", "John"]),
    ("Caroline's pottery class was fun.", ["Caroline"]),
    ("The Beatles played and we met Dr Smith.", ["Beatles", "Dr Smith"]),
])
def test_capitalised_names(text: str, want: list[str]) -> None:
    assert extract_entities(text) == want


@pytest.mark.parametrize("text", [
    "The cat sat on the mat.",
    "Thanks! Yes, I think so. Well, maybe tomorrow.",
    "I was there on Friday in March.",  # weekdays and months are not entities
    "e.g. this, i.e. that, version 1.2.3",
    "Pottery is relaxing, I love pottery.",  # a sentence-initial common word
])
def test_stop_words_and_openers_are_not_entities(text: str) -> None:
    assert extract_entities(text) == []


def test_code_identifiers_longest_match_wins() -> None:
    text = ("Call store.open() then Field.remember(); the parse_reply function, the "
            "KnowledgeGraph class, getUser and MAX_HOPS; finally run().")
    assert extract_entities(text) == [
        "store.open", "Field.remember", "parse_reply", "KnowledgeGraph", "getUser",
        "MAX_HOPS", "run"]


def test_one_entity_per_normalised_key_in_first_display_form() -> None:
    assert extract_entities("Caroline met CAROLINE's friend. caroline_x and Caroline.") == [
        "Caroline", "caroline_x"]
    got = extract_entities("We saw Caroline. Later Caroline's dog.")
    assert got == ["Caroline"]
    assert normalise("  Caroline   Smith's ") == "caroline smith"
    assert normalise("store.open()") == "store.open"


def test_noun_phrase_candidates() -> None:
    got = noun_phrases("I joined a pottery class and a local adoption agency helped me "
                       "really quickly.")
    assert "pottery class" in got and "adoption agency" in got
    assert "local adoption agency" in got
    assert "agency helped" not in got  # ends in a past-tense verb
    assert not any("really" in p or "quickly" in p for p in got)  # adverbs break runs
    assert noun_phrases("I am so happy!") == []


def test_phrase_counter_promotes_recurring_phrases() -> None:
    counter = PhraseCounter(min_count=3)
    assert counter.add("m1", "My pottery class starts today.") == {}
    assert counter.add("m2", "The pottery class was fun.") == {}
    assert extract_entities("We had pottery class with Caroline",
                            phrases=counter) == ["Caroline"]  # not frequent yet
    promoted = counter.add("m3", "Back at pottery class again")
    assert promoted == {"pottery class": ("m1", "m2", "m3")}  # link the earlier memories
    assert counter.add("m4", "pottery class!") == {}  # promoted once
    assert counter.is_frequent("pottery class")
    assert extract_entities("We had pottery class with Caroline.", phrases=counter) == [
        "pottery class", "Caroline"]
    # a frequent phrase also wins over a sentence-initial capital ("Pottery" alone would
    # pass for a name: without a dictionary, a lone opening word is kept)
    assert extract_entities("Pottery class with Caroline.") == ["Pottery", "Caroline"]
    assert extract_entities("Pottery class with Caroline.", phrases=counter) == [
        "pottery class", "Caroline"]  # phrases display in lowercase
    with pytest.raises(ValueError, match="min_count"):
        PhraseCounter(min_count=0)


def test_phrase_counter_is_bounded() -> None:
    counter = PhraseCounter(min_count=2, max_phrases=100)
    for i in range(200):
        counter.add(f"m{i}", f"alpha{i} beta{i} gamma{i}")
    assert len(counter) <= 100
