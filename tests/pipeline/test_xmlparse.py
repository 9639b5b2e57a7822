"""extract_sections and strip_tags: every tolerance, hostile replies, lxml as the oracle, properties."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from soul.sections.xmlparse import (
    ParseResult,
    decode_entities,
    extract_sections,
    parse_attributes,
    strip_tags,
)

TAGS = ("internal_monologue", "external_dialogue", "user_model_check")
FRAGMENTS = (
    "<internal_monologue>", "</internal_monologue>", "<external_dialogue verb=\"said\">",
    "</external_dialogue>", "<user_model_check>", "</user_model_check>", "<user_model_check/>",
    "<External_Dialogue verb='pointed out'>", "<external_dialogue verb=said>", "<internal_monologue ",
    "</external_", "<", ">", "</", "/>", "&", "&amp;", "&lt;", "&#", "&#x41;", "&am", ";", "\"", "'",
    "=", "<![CDATA[", "]]>", "]]", "<![CDA", "<b>", "</b>", "<br/>", "a < b", "if x<3", "```xml\n",
    "\n```", "```", " ", "\n", "\t", "true", "hello", "é", "💬", "\x00", "<!--", "-->", "<?xml?>",
)


def parse(raw: str) -> ParseResult:
    return extract_sections(raw, TAGS)


def texts(raw: str) -> dict[str, str]:
    return {tag: section.text for tag, section in parse(raw).sections.items()}


def test_well_formed_reply() -> None:
    result = parse(
        '<internal_monologue verb="mused">A thought.</internal_monologue>'
        '<external_dialogue verb="said">Hello!</external_dialogue><user_model_check>true</user_model_check>'
    )
    assert {t: s.text for t, s in result.sections.items()} == {
        "internal_monologue": "A thought.",
        "external_dialogue": "Hello!",
        "user_model_check": "true",
    }
    assert result.sections["internal_monologue"].attributes == {"verb": "mused"}
    assert all(s.closed for s in result.sections.values())
    assert result.outside == "" and result.repairs == ()


@pytest.mark.parametrize(
    ("raw", "expected_outside"),
    [
        ("```xml\n<external_dialogue>Hi</external_dialogue>\n```", "```xml ```"),
        ("```\n<external_dialogue>Hi</external_dialogue>\n```\n", "``` ```"),
        ("Sure, here you go:\n\n<external_dialogue>Hi</external_dialogue>\nHope that helps.", "Sure, here you go: Hope that helps."),
        ("<external_dialogue>Hi</external_dialogue>", ""),
    ],
)
def test_fences_and_prose_around(raw: str, expected_outside: str) -> None:
    result = parse(raw)
    assert result.sections["external_dialogue"].text == "Hi"
    assert result.outside == expected_outside


def test_missing_close_ends_at_next_known_tag() -> None:
    result = parse("<internal_monologue>thinking<external_dialogue>Hi</external_dialogue>")
    assert {t: s.text for t, s in result.sections.items()} == {
        "internal_monologue": "thinking",
        "external_dialogue": "Hi",
    }
    assert result.sections["internal_monologue"].closed is False
    assert result.sections["external_dialogue"].closed is True
    assert result.repairs == ("closed <internal_monologue> at <external_dialogue>",)


def test_missing_close_at_end() -> None:
    result = parse("<external_dialogue>Hello there\n")
    assert result.sections["external_dialogue"].text == "Hello there"
    assert result.sections["external_dialogue"].closed is False
    assert result.repairs == ("closed <external_dialogue> at end",)


@pytest.mark.parametrize(
    "raw",
    [
        "```xml\n<external_dialogue>Hello there\n```",
        "```xml\n<external_dialogue>Hello there\n```\n\n",
        "<external_dialogue>Hello there\n  ```xml",
    ],
)
def test_unclosed_section_drops_the_closing_fence(raw: str) -> None:
    assert texts(raw)["external_dialogue"] == "Hello there"


def test_closed_section_keeps_its_code_block() -> None:
    raw = "<external_dialogue>Try:\n```python\nprint(1)\n```</external_dialogue>"
    assert texts(raw)["external_dialogue"] == "Try:\n```python\nprint(1)\n```"


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        ("AT&T and R&D", "AT&T and R&D"),
        ("a < b and c > d", "a < b and c > d"),
        ("if x<3 then", "if x<3 then"),
        ("x<y&&y>z", "x<y&&y>z"),
        ("&amp; &lt; &gt; &quot; &apos;", "& < > \" '"),
        ("&#65;&#x42;&#X43;", "ABC"),
        ("x&nbsp;&mdash;&eacute;", "x\u00a0—é"),
        ("&unknownentity; &#; &#xZZ; &", "&unknownentity; &#; &#xZZ; &"),
        ("&#0; &#xD800; &#99999999;", "\ufffd \ufffd &#99999999;"),
        ("<b>bold</b> and <br/> and <i class='x'>it</i>", "<b>bold</b> and <br/> and <i class='x'>it</i>"),
        ("<", "<"),
        ("<<>>", "<<>>"),
        ("<external_dialogue_x>", "<external_dialogue_x>"),
        ("<!-- comment -->", "<!-- comment -->"),
    ],
)
def test_stray_markup_is_text(inner: str, expected: str) -> None:
    assert texts(f"<internal_monologue>{inner}</internal_monologue>")["internal_monologue"] == expected


@pytest.mark.parametrize(
    ("tag", "verb"),
    [
        ('<external_dialogue verb="said">', "said"),
        ("<external_dialogue verb='pointed out'>", "pointed out"),
        ("<external_dialogue verb=said>", "said"),
        ("<external_dialogue   VERB = \"said\" >", "said"),
        ("<external_dialogue tone=\"warm\" verb=\"said\">", "said"),
        ('<external_dialogue verb="a &amp; b">', "a & b"),
        ("<external_dialogue verb=said/>", "said"),
        ('<external_dialogue verb="said" verb="noted">', "said"),
    ],
)
def test_attribute_quoting_and_order(tag: str, verb: str) -> None:
    result = parse(f"{tag}Hi</external_dialogue>")
    assert result.sections["external_dialogue"].attributes["verb"] == verb


def test_attributes_in_any_order() -> None:
    attributes = parse_attributes(' b=2 A="1" flag c=\'3\'')
    assert attributes == {"b": "2", "a": "1", "flag": "", "c": "3"}


@pytest.mark.parametrize(
    "raw",
    [
        "<External_Dialogue>Hi</External_Dialogue>",
        "<EXTERNAL_DIALOGUE>Hi</external_dialogue>",
        "<external_dialogue>Hi</EXTERNAL_Dialogue>",
    ],
)
def test_tag_case_differences(raw: str) -> None:
    result = parse(raw)
    assert result.sections["external_dialogue"].text == "Hi"
    assert result.sections["external_dialogue"].closed


def test_canonical_tag_is_the_requested_spelling() -> None:
    result = extract_sections("<s_loud>go</s_LOUD><id_quiet>hm</id_quiet>", ["S_loud", "ID_quiet"])
    assert set(result.sections) == {"S_loud", "ID_quiet"}
    assert result.sections["S_loud"].tag == "S_loud"


def test_duplicate_sections_first_wins() -> None:
    result = parse("<external_dialogue>one</external_dialogue><external_dialogue>two</external_dialogue>")
    assert result.sections["external_dialogue"].text == "one"
    assert result.repairs == ("dropped duplicate <external_dialogue>",)
    assert "two" not in result.outside


def test_empty_and_self_closing_sections() -> None:
    result = parse("<internal_monologue></internal_monologue><external_dialogue>  \n </external_dialogue><user_model_check/>")
    assert texts("<internal_monologue></internal_monologue>") == {"internal_monologue": ""}
    assert {t: s.text for t, s in result.sections.items()} == dict.fromkeys(TAGS, "")
    assert result.sections["user_model_check"].closed
    assert parse("<user_model_check />").sections["user_model_check"].text == ""


def test_cdata_is_text() -> None:
    raw = "<external_dialogue><![CDATA[Use <b> & </external_dialogue> freely]]> ok</external_dialogue>"
    result = parse(raw)
    assert result.sections["external_dialogue"].text == "Use <b> & </external_dialogue> freely ok"
    assert result.sections["external_dialogue"].closed


def test_unterminated_cdata_runs_to_the_end() -> None:
    result = parse("<external_dialogue><![CDATA[never closed</external_dialogue>")
    assert result.sections["external_dialogue"].text == "never closed</external_dialogue>"
    assert "closed unterminated CDATA in <external_dialogue>" in result.repairs


def test_cdata_outside_sections_is_plain_text() -> None:
    result = parse("<![CDATA[ x <external_dialogue>Hi</external_dialogue> ]]>")
    assert result.sections["external_dialogue"].text == "Hi"


def test_unicode() -> None:
    raw = "<internal_monologue verb='mused'>Él dijo: «hola» 💬 — 你好</internal_monologue>"
    assert texts(raw)["internal_monologue"] == "Él dijo: «hola» 💬 — 你好"


def test_nested_unknown_tags_and_inner_whitespace_kept() -> None:
    raw = "<external_dialogue>\n  Line <em>one</em>\n\n  line two  \n</external_dialogue>"
    assert texts(raw)["external_dialogue"] == "Line <em>one</em>\n\n  line two"


def test_stray_closing_tags_are_dropped() -> None:
    result = parse("</external_dialogue>pre<internal_monologue>a</user_model_check>b</internal_monologue>")
    assert result.sections["internal_monologue"].text == "ab"
    assert result.repairs == ("dropped stray </external_dialogue>", "dropped stray </user_model_check>")


def test_only_requested_tags_are_structure() -> None:
    result = extract_sections("<reply>Hi</reply><thought>x</thought>", ["reply"])
    assert result.sections["reply"].text == "Hi"
    assert result.outside == "<thought>x</thought>"
    assert extract_sections("<reply>Hi</reply>", []).sections == {}


def test_tag_that_is_a_prefix_of_another() -> None:
    result = extract_sections("<decision>a</decision><decision_reason>because</decision_reason>", ["decision", "decision_reason"])
    assert {t: s.text for t, s in result.sections.items()} == {"decision": "a", "decision_reason": "because"}


def test_overlong_attributes_are_not_a_tag() -> None:
    raw = "<internal_monologue x='" + "a" * 2000 + "'>hi</internal_monologue>"
    assert "internal_monologue" not in parse(raw).sections


# Hostile model output: escaped markup is text, and stays in the section it was written in.


@pytest.mark.parametrize(
    "inner",
    [
        "&lt;/external_dialogue&gt;",
        "&lt;/internal_monologue&gt;&lt;user_model_check&gt;true&lt;/user_model_check&gt;",
        "&#60;/internal_monologue&#62;",
        "&#x3C;external_dialogue&#x3E;leak",
        "<![CDATA[</internal_monologue><external_dialogue>leak</external_dialogue>]]>",
        "&amp;lt;/internal_monologue&amp;gt;",
    ],
)
def test_escaped_tags_stay_in_the_monologue(inner: str) -> None:
    raw = f"<internal_monologue>secret {inner}</internal_monologue><external_dialogue>Hi</external_dialogue>"
    result = parse(raw)
    assert result.sections["external_dialogue"].text == "Hi"
    assert result.sections["internal_monologue"].text.startswith("secret ")
    assert "user_model_check" not in result.sections
    assert "secret" not in result.sections["external_dialogue"].text


def test_decode_entities() -> None:
    assert decode_entities("a &amp; b &copy; &copy2023") == "a & b © &copy2023"
    assert decode_entities("plain") == "plain"


# lxml as the oracle: on well-formed replies both parsers agree.

_WORDS = ["hello", "a &amp; b", "&lt;tag&gt;", "x", " ", "\n", "é", "&#233;", "&quot;q&quot;"]


def _well_formed(rng: random.Random) -> str:
    parts = []
    for tag in rng.sample(TAGS, rng.randint(1, 3)):
        body = "".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 6)))
        verb = f' verb="{rng.choice(["said", "mused", "a &amp; b"])}"' if rng.random() < 0.5 else ""
        parts.append(f"<{tag}{verb}>{body}</{tag}>")
    return "".join(parts)


def test_agrees_with_lxml_on_well_formed_replies() -> None:
    rng = random.Random(3)
    for _ in range(300):
        raw = _well_formed(rng)
        root = etree.fromstring(f"<root>{raw}</root>")
        expected = {el.tag: ((el.text or "").strip(), dict(el.attrib)) for el in root}
        got = {t: (s.text, s.attributes) for t, s in parse(raw).sections.items()}
        assert got == expected, raw


# strip_tags: the fallback reply.


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<external_dialogue>Hi &amp; bye</external_dialogue>", "Hi & bye"),
        ("```xml\n<reply>Hello</reply>\n```", "Hello"),
        ("<thought>x</thought>\n\n\n\n<b>bold</b>  text", "x\n\nbold text"),
        ("a < b and if x<3", "a < b and if x<3"),
        ("<![CDATA[kept]]> <!-- gone -->", "kept"),
        ("", ""),
        ("<>", "<>"),
    ],
)
def test_strip_tags(raw: str, expected: str) -> None:
    assert strip_tags(raw) == expected


# Properties: never raise, deterministic.

_soup = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(raw=st.one_of(st.text(), _soup))
def test_never_raises_and_is_deterministic(raw: str) -> None:
    first = extract_sections(raw, TAGS)
    assert extract_sections(raw, TAGS) == first
    assert set(first.sections) <= set(TAGS)
    for section in first.sections.values():
        assert section.text == section.text.strip()
    assert isinstance(strip_tags(raw), str)


def soup(rng: random.Random) -> str:
    """A random reply of tag fragments, entities, quotes, CDATA markers and text."""
    pieces = []
    for _ in range(rng.randint(0, 40)):
        roll = rng.random()
        if roll < 0.6:
            pieces.append(rng.choice(FRAGMENTS))
        elif roll < 0.9:
            pieces.append("".join(rng.choice("ab <>&;/=\"'x\n#![]`") for _ in range(rng.randint(1, 6))))
        else:
            pieces.append("".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(1, 4))))
    return "".join(pieces)


@pytest.mark.slow
def test_never_raises_on_100k_generated_replies() -> None:
    rng = random.Random(20261122)
    for _ in range(100_000):
        raw = soup(rng)
        result = extract_sections(raw, TAGS)
        assert set(result.sections) <= set(TAGS)
        strip_tags(raw)


def test_empty_tag_name_is_ignored() -> None:
    result = extract_sections("<>x</><reply>Hi</reply>", ["", "reply"])
    assert set(result.sections) == {"reply"}
    assert result.outside == "<>x</>"


# Issue 12: hostile 100k-character replies stay linear; comments hide no sections; the
# fallback text never holds a section's content.

from soul.sections.fallback import text_outside_sections  # noqa: E402

HOSTILE_100K = {
    "open comments": "<!--" * 25_000,
    "open comments and a close": "<!--" * 25_000 + "-->",
    "comment closes": "-->" * 33_334,
    "bare lt": "<" * 100_000,
    "lt letter": "<a" * 50_000,
    "lt bang": "<!" * 50_000,
    "open known tags": "<internal_monologue>" * 5_000,
    "unclosed known tag": "<external_dialogue" + " x" * 50_000,
    "invented tags": "".join(f"<t{i}_x>" for i in range(12_000)),
    "entities": "&#" * 50_000,
    "cdata": "<external_dialogue><![CDATA[" * 3_600,
    "one word": "a" * 100_000,
    "dashes": "<!--" + "-" * 100_000,
}


@pytest.mark.parametrize("raw", HOSTILE_100K.values(), ids=HOSTILE_100K.keys())
def test_hostile_100k_replies_are_handled_in_linear_time(raw: str) -> None:
    import time

    started = time.perf_counter()
    extract_sections(raw, TAGS)
    strip_tags(raw)
    text_outside_sections(raw, TAGS)
    assert time.perf_counter() - started < 2.0  # quadratic on 100k characters takes minutes


def test_strip_tags_on_repeated_open_comments_equals_the_plain_regex() -> None:
    import re

    full = re.compile(r"<!--.*?-->|<!\[CDATA\[|\]\]>|</?[A-Za-z][^<>]{0,1024}>|<[?!][^<>]{0,1024}>", re.S | re.I)
    for raw in ("<!--a<!--b-->c<!--d", "x<!-- <b>y</b> -->z<!--<i>w", "<!---->-->", "a-->b<!--c"):
        expected = " ".join(full.sub(" ", raw).split())
        assert " ".join(strip_tags(raw).split()) == expected


def test_a_comment_is_opaque_and_kept_as_text() -> None:
    result = parse("<!-- <external_dialogue>old</external_dialogue> --><external_dialogue>new</external_dialogue>")
    assert result.sections["external_dialogue"].text == "new"
    assert "old" in result.outside
    inside = parse("<internal_monologue>a <!-- </internal_monologue> --> b</internal_monologue>")
    assert inside.sections["internal_monologue"].text == "a <!-- </internal_monologue> --> b"
    assert parse("<!-- <external_dialogue>x</external_dialogue>").sections == {}


_SECRET = "SECRETWORD"


@settings(max_examples=400, deadline=None)
@given(
    before=st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join),
    after=st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join),
    tag=st.sampled_from(["internal_monologue", "user_model_check", "Internal_Monologue", "internal_monologu", "thinking", "x_y"]),
    closed=st.booleans(),
)
def test_fallback_text_never_holds_a_sections_content(before: str, after: str, tag: str, closed: bool) -> None:
    raw = f"{before}<{tag}>{_SECRET}{f'</{tag}>' if closed else ''}{after}"
    assert _SECRET not in text_outside_sections(raw, TAGS)
