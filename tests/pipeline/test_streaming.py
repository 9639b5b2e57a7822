"""SectionStream: only streamed sections' text, any chunking, equal to the whole-reply parse."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.sections.streaming import Closed, Opened, SectionStream, Text
from soul.sections.xmlparse import extract_sections

TAGS = ("internal_monologue", "external_dialogue", "user_model_check")
STREAM = ("external_dialogue",)
FRAGMENTS = (
    "<internal_monologue>", "</internal_monologue>", "<external_dialogue verb=\"said\">",
    "</external_dialogue>", "<user_model_check>", "</user_model_check>", "<user_model_check/>",
    "<External_Dialogue verb='pointed out'>", "<external_dialogue verb=said>", "<internal_monologue ",
    "</external_", "<exter", "<", ">", "</", "/>", "&", "&amp;", "&lt;", "&#", "&#x41;", "&am", "&#128172;",
    ";", "\"", "'", "=", "<![CDATA[", "]]>", "]]", "]", "<![CDA", "<b>", "</b>", "a < b", "if x<3",
    "```xml\n", "\n```", "```", "``", "`", " ", "\n", "\n\n", "\t", "true", "hello", "é", "💬", "\x00",
)


def stream(raw: str, cuts: list[int], tags: tuple[str, ...] = TAGS, streamed: tuple[str, ...] = STREAM) -> list:
    """Feed `raw` split at `cuts`, then close; all events."""
    parser = SectionStream(tags, streamed)
    events: list = []
    start = 0
    for cut in sorted(set(cuts)):
        events += parser.feed(raw[start:cut])
        start = cut
    events += parser.feed(raw[start:])
    events += parser.close()
    return events


def streamed_text(events: list, tag: str) -> str:
    return "".join(e.text for e in events if isinstance(e, Text) and e.tag == tag)


def check_against_batch(raw: str, cuts: list[int], streamed: tuple[str, ...] = STREAM) -> None:
    """The property: streamed text equals parsed text; events are well-formed and ordered."""
    events = stream(raw, cuts, streamed=streamed)
    result = extract_sections(raw, TAGS)
    for tag in TAGS:
        expected = result.sections[tag].text if tag in result.sections and tag in streamed else ""
        assert streamed_text(events, tag) == expected, (raw, cuts, tag)
    assert all(e.tag in streamed for e in events if isinstance(e, Text))
    assert [e.tag for e in events if isinstance(e, Opened)] == list(result.sections)
    assert [e.tag for e in events if isinstance(e, Closed)] == list(result.sections)
    for event in events:
        if isinstance(event, Opened):
            assert event.attributes == result.sections[event.tag].attributes
        if isinstance(event, Text):
            assert event.text


REPLY = (
    "```xml\n<internal_monologue verb='mused'>Private &amp; secret</internal_monologue>\n"
    '<external_dialogue verb="said">Hello &amp; welcome, a &lt; b!\nSecond line.</external_dialogue>\n'
    "<user_model_check>true</user_model_check>\n```"
)


def test_whole_reply_at_once() -> None:
    events = stream(REPLY, [])
    assert events == [
        Opened("internal_monologue", {"verb": "mused"}),
        Closed("internal_monologue"),
        Opened("external_dialogue", {"verb": "said"}),
        Text("external_dialogue", "Hello & welcome, a < b!\nSecond line."),
        Closed("external_dialogue"),
        Opened("user_model_check", {}),
        Closed("user_model_check"),
    ]


def test_every_single_split_point() -> None:
    for cut in range(len(REPLY) + 1):
        check_against_batch(REPLY, [cut])


def test_one_character_at_a_time() -> None:
    events = stream(REPLY, list(range(len(REPLY))))
    assert streamed_text(events, "external_dialogue") == "Hello & welcome, a < b!\nSecond line."
    assert not any(isinstance(e, Text) and e.tag != "external_dialogue" for e in events)


def test_text_flows_before_the_section_closes() -> None:
    parser = SectionStream(TAGS, STREAM)
    assert parser.feed("<external_dialogue>Hello") == [Opened("external_dialogue", {}), Text("external_dialogue", "Hello")]
    assert parser.feed(" wor") == [Text("external_dialogue", " wor")]
    assert parser.feed("ld ") == [Text("external_dialogue", "ld")]
    assert parser.feed("</external_dialogue>") == [Closed("external_dialogue")]
    assert parser.opened == {"external_dialogue"}


def test_entity_split_across_chunks() -> None:
    parser = SectionStream(TAGS, STREAM)
    assert parser.feed("<external_dialogue>fish &am") == [Opened("external_dialogue", {}), Text("external_dialogue", "fish")]
    assert parser.feed("p; chips") == [Text("external_dialogue", " & chips")]


def test_stray_ampersand_is_released_when_it_cannot_be_an_entity() -> None:
    parser = SectionStream(TAGS, STREAM)
    assert parser.feed("<external_dialogue>AT&")[1:] == [Text("external_dialogue", "AT")]
    assert parser.feed("T is") == [Text("external_dialogue", "&T is")]


def test_partial_tag_is_never_emitted_as_text() -> None:
    parser = SectionStream(TAGS, STREAM)
    events = parser.feed("<external_dialogue>Hi</exter")
    assert events == [Opened("external_dialogue", {}), Text("external_dialogue", "Hi")]
    assert parser.feed("nal_dialogue><internal_mono") == [Closed("external_dialogue")]
    assert parser.feed("logue>x") == [Opened("internal_monologue", {})]


def test_lookalike_tag_is_released_as_text() -> None:
    parser = SectionStream(TAGS, STREAM)
    parser.feed("<external_dialogue>use <exter")
    assert parser.feed("iors") == [Text("external_dialogue", " <exteriors")]


def test_attribute_split_across_chunks() -> None:
    parser = SectionStream(TAGS, STREAM)
    assert parser.feed("<external_dialogue verb='poin") == []
    assert parser.feed("ted out'>Hi") == [Opened("external_dialogue", {"verb": "pointed out"}), Text("external_dialogue", "Hi")]


def test_opened_tracks_sections_before_the_streamed_one() -> None:
    parser = SectionStream(TAGS, STREAM)
    parser.feed("<internal_monologue>thinking about it")
    assert parser.opened == {"internal_monologue"}
    assert "external_dialogue" not in parser.opened


def test_thoughts_are_never_streamed() -> None:
    raw = "<internal_monologue>SECRET</internal_monologue><user_model_check>SECRET</user_model_check>Outside SECRET"
    events = stream(raw, list(range(0, len(raw), 3)))
    assert not [e for e in events if isinstance(e, Text)]


def test_escaped_close_tag_stays_in_the_monologue() -> None:
    raw = "<internal_monologue>&lt;/internal_monologue&gt;&lt;external_dialogue&gt;leak</internal_monologue><external_dialogue>Hi</external_dialogue>"
    for cut in range(len(raw)):
        events = stream(raw, [cut])
        assert streamed_text(events, "external_dialogue") == "Hi"


def test_cdata_streams_verbatim() -> None:
    raw = "<external_dialogue><![CDATA[a </external_dialogue> & b]]]></external_dialogue>"
    for cut in range(len(raw)):
        assert streamed_text(stream(raw, [cut]), "external_dialogue") == "a </external_dialogue> & b]"


def test_unclosed_section_closes_at_end_without_its_fence() -> None:
    raw = "```xml\n<external_dialogue>Hello there\n```"
    for cut in range(len(raw)):
        events = stream(raw, [cut])
        assert streamed_text(events, "external_dialogue") == "Hello there"
        assert events[-1] == Closed("external_dialogue")


def test_closed_section_keeps_a_final_code_fence() -> None:
    raw = "<external_dialogue>Try:\n```py\nx\n```</external_dialogue>"
    for cut in range(len(raw)):
        assert streamed_text(stream(raw, [cut]), "external_dialogue") == "Try:\n```py\nx\n```"


def test_duplicate_gives_no_events() -> None:
    events = stream("<external_dialogue>one</external_dialogue><external_dialogue>two</external_dialogue>", [5, 30])
    assert events == [Opened("external_dialogue", {}), Text("external_dialogue", "one"), Closed("external_dialogue")]


def test_stream_tags_case_insensitive_and_unknown_ignored() -> None:
    events = stream("<external_dialogue>Hi</external_dialogue>", [], streamed=("External_Dialogue", "nonexistent"))
    assert streamed_text(events, "external_dialogue") == "Hi"


def test_feed_after_close_is_ignored() -> None:
    parser = SectionStream(TAGS, STREAM)
    parser.feed("<external_dialogue>Hi")
    assert parser.close() == [Closed("external_dialogue")]
    assert parser.feed("more") == [] and parser.close() == []


def test_held_back_text_is_bounded() -> None:
    parser = SectionStream(TAGS, STREAM)
    parser.feed("<external_dialogue>")
    emitted = "".join(e.text for c in "word " * 2000 for e in parser.feed(c) if isinstance(e, Text))
    assert len(emitted) >= len("word " * 2000) - 1


# Properties over random replies and random chunkings.

_soup = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(raw=st.one_of(_soup, st.text(max_size=60)), data=st.data())
def test_streamed_text_equals_parsed_text(raw: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12))
    streamed = data.draw(st.sampled_from([STREAM, TAGS, ()]))
    check_against_batch(raw, cuts, streamed)


def soup(rng: random.Random) -> str:
    """A random reply of tag fragments, entities, quotes, CDATA markers and text."""
    pieces = []
    for _ in range(rng.randint(0, 30)):
        roll = rng.random()
        if roll < 0.7:
            pieces.append(rng.choice(FRAGMENTS))
        elif roll < 0.95:
            pieces.append("".join(rng.choice("ab <>&;/=\"'x\n#![]`") for _ in range(rng.randint(1, 6))))
        else:
            pieces.append("".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(1, 4))))
    return "".join(pieces)


@pytest.mark.slow
def test_streamed_text_equals_parsed_text_on_100k_replies() -> None:
    rng = random.Random(20261123)
    for _ in range(100_000):
        raw = soup(rng)
        cuts = [rng.randint(0, len(raw)) for _ in range(rng.randint(0, 10))]
        check_against_batch(raw, cuts, rng.choice([STREAM, TAGS]))


def test_a_comment_streams_as_text_and_hides_its_tags() -> None:
    raw = "<external_dialogue>a <!-- </external_dialogue> --> b</external_dialogue><!-- <external_dialogue>x"
    for cuts in ([], [22, 23, 24, 40], list(range(len(raw)))):
        check_against_batch(raw, cuts, STREAM)
    parser = SectionStream(TAGS, STREAM)
    out = "".join(e.text for c in raw for e in parser.feed(c) if isinstance(e, Text))
    out += "".join(e.text for e in parser.close() if isinstance(e, Text))
    assert out == "a <!-- </external_dialogue> --> b"
