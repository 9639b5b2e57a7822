"""Issue 12 (items 1, 15): the fallback reply never carries a thought; an empty reply is re-asked;
a second reply section is flagged; comments hide no sections."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from souls import claudius_reply

import soul
from soul.providers.scripted import ScriptedProvider
from soul.runtime.events import Reply, Token
from soul.runtime.turn.replies import FALLBACK_REPLY
from soul.sections import extract_sections, text_outside_sections

SECRET = "SECRET plan to flatter her"
TAGS = ("internal_monologue", "external_dialogue", "user_model_check")

# Replies whose reply section is missing; none may show or store SECRET (nor the bare verdict).
LEAKY = [
    f"<internal_monologue>{SECRET}</internal_monologue><user_model_check>false</user_model_check>",
    f"<internal_monologue>{SECRET}</internal_monologue><external_dialogu>Hello</external_dialogu>",
    f"<internal_monologue>{SECRET}",
    f"<internal_monologu>{SECRET}</internal_monologu>",
    f"<internal_monologue>{SECRET}</internal_monolog> trailing",
    f"<thinking>{SECRET}</thinking>",
    f"<thinking>{SECRET}",
    f"<!-- {SECRET} -->",
    f"<!-- {SECRET}",
    f"<internal_monologue><![CDATA[</internal_monologue>{SECRET}]]></internal_monologue>",
    f"<internal_monologue>a</internal_monologue><internal_monologue>{SECRET}</internal_monologue>",
    f"&lt;b&gt;<INTERNAL_MONOLOGUE>{SECRET}</INTERNAL_MONOLOGUE>",
    f"<external_dialogue/><internal_monologue>{SECRET}</internal_monologue>",
]


def claudius(replies: list[str], home: Path) -> tuple[soul.Soul, ScriptedProvider]:
    provider = ScriptedProvider(replies)
    return soul.load("claudius", provider=provider, home=home), provider


@pytest.mark.parametrize("raw", LEAKY)
def test_no_thought_is_left_in_the_text_outside_sections(raw: str) -> None:
    text = text_outside_sections(raw, TAGS)
    assert "SECRET" not in text and "false" not in text


@pytest.mark.parametrize("raw", LEAKY[:7])
def test_a_missing_reply_never_shows_or_stores_a_thought(raw: str, soul_home: Path) -> None:
    s, _ = claudius([raw, raw], soul_home)
    session = s.session(user="ada")
    result = session.turn_sync("hi")
    assert result.reply == FALLBACK_REPLY
    stored = [record for _, record, _ in s.store.messages(session.id)]
    said = [r.content for r in stored if r.layer == "external" and r.tag != "user"]
    assert said == [FALLBACK_REPLY]


def test_prose_around_the_sections_is_still_the_fallback(soul_home: Path) -> None:
    raw = f"Well, <b>hello</b> there.<internal_monologue>{SECRET}</internal_monologue>"
    s, _ = claudius([raw, raw], soul_home)
    assert s.session().turn_sync("hi").reply == "Well, hello there."


def test_streamed_missing_reply_emits_no_token_and_falls_back(soul_home: Path) -> None:
    raw = f"<internal_monologue>{SECRET}</internal_monologue><user_model_check>false</user_model_check>"
    s, _ = claudius([raw, raw], soul_home)
    session = s.session(user="ada")

    async def go() -> list[object]:
        return [event async for event in session.stream("hi")]

    events = asyncio.run(go())
    assert not [e for e in events if isinstance(e, Token)]
    assert [e.text for e in events if isinstance(e, Reply)] == [FALLBACK_REPLY]


@pytest.mark.parametrize("empty", ["<external_dialogue/>", "<external_dialogue>  \n </external_dialogue>"])
def test_an_empty_reply_section_is_reasked(empty: str, soul_home: Path) -> None:
    first = claudius_reply(check="false").replace(
        '<external_dialogue verb="quipped">Hello, Ada. Compilers, then — a noble way to suffer.</external_dialogue>', empty
    )
    assert empty in first
    s, provider = claudius([first, claudius_reply(check="false")], soul_home)
    result = s.session().turn_sync("hi")
    assert provider.calls == 2
    assert result.reply.startswith("Hello, Ada")
    assert "<external_dialogue> is empty" in provider.requests[1].messages[-1].content


def test_an_empty_reply_after_the_retries_is_the_fixed_line(soul_home: Path) -> None:
    raw = f"<internal_monologue>{SECRET}</internal_monologue><external_dialogue></external_dialogue>"
    s, _ = claudius([raw, raw], soul_home)
    result = s.session().turn_sync("hi")
    assert result.reply == FALLBACK_REPLY
    assert {st.step: st.status for st in result.trace.steps}["reply"] == "fallback"


def test_a_second_reply_section_is_dropped_and_flagged(soul_home: Path) -> None:
    raw = claudius_reply(check="false") + "<external_dialogue>A second answer.</external_dialogue>"
    s, _ = claudius([raw], soul_home)
    result = s.session().turn_sync("hi")
    assert result.reply.startswith("Hello, Ada") and "second" not in result.reply
    flags = {st.step: st.flags for st in result.trace.steps}["reply"]
    assert any("more than once" in f for f in flags)


def test_tags_inside_a_comment_are_not_sections() -> None:
    raw = "<!-- <external_dialogue>old</external_dialogue> --><external_dialogue>new</external_dialogue>"
    assert extract_sections(raw, TAGS).sections["external_dialogue"].text == "new"
    hidden = extract_sections("<!-- <external_dialogue>x</external_dialogue> -->", TAGS)
    assert hidden.sections == {}
