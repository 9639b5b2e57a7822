"""The conversation as the models see it (issue 15.1, 15.4): speaker-labelled turns as chat
messages, what each step declares it sees, labelled and bounded working memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conversation_souls import converse, load, reply

import soul
from soul.providers import ScriptedProvider


def test_earlier_turns_arrive_as_user_and_assistant_messages_before_the_current_one(tmp_path: Path) -> None:
    s, turns, _ = load(tmp_path, [reply(f"answer {i} <b>") for i in range(3)])
    converse(s.session(user="ada"), ["I am Ada", "my cat is Tom", "and you?"])
    roles = [(m.role, m.content) for m in turns.requests[2].messages]
    assert [r for r, _ in roles] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert roles[1][1] == "ada: I am Ada" and roles[2][1] == "answer 0 &lt;b&gt;"  # escaped like all untrusted text
    assert roles[3][1] == "ada: my cat is Tom" and "and you?" in roles[5][1]
    assert "Working Memory" in roles[0][1] and "answer 0" not in roles[0][1]  # no longer bullets


def test_a_spontaneous_turn_is_marked_as_such_in_the_history(tmp_path: Path) -> None:
    s, turns, _ = load(tmp_path, [reply("hello"), reply("I was thinking of you"), reply("yes")])
    session = s.session(user="ada")

    async def go() -> None:
        await session.turn("hi")
        await session.spontaneous()
        await session.turn("really?")

    asyncio.run(go())
    contents = [m.content for m in turns.requests[2].messages[1:-1]]
    assert contents[2].startswith("[spontaneous turn") and contents[3] == "I was thinking of you"


def test_a_step_sees_the_turns_it_declares_and_a_fused_call_the_most_of_its_steps(tmp_path: Path) -> None:
    s, turns, _ = load(tmp_path, [reply(f"a{i}") for i in range(4)], think=", history: {turns: 1}")
    converse(s.session(user="ada"), ["one", "two", "three", "four"])
    assert len(turns.requests[3].messages) == 2 + 2 * 3  # the reply's default (12 turns) wins the fused call
    (tmp_path / "talker.yaml").write_text((tmp_path / "talker.yaml").read_text().replace(
        "reply: {uses: external_dialogue, after: [think]}", "reply: {uses: external_dialogue, after: [think], history: {turns: 1}}"))
    t2 = ScriptedProvider([reply(f"b{i}") for i in range(3)])
    s2 = soul.load(tmp_path / "talker.yaml", provider={"main": t2, "cheap": ScriptedProvider([])}, home=tmp_path / "home2")
    result = converse(s2.session(user="ada"), ["one", "two", "three"])[-1]
    assert [m.content for m in t2.requests[2].messages[1:3]] == ["ada: two", "b1"]
    assert any(c["part"] == "history" and c["what"] == "turns 1-1" for c in result.trace.calls[0].cut)


def test_working_memory_entries_carry_their_step_kind_and_turn_and_no_check_question(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from souls import claudius_reply

    provider = ScriptedProvider([claudius_reply(), claudius_reply("Again.")])
    s = soul.load("claudius", provider=provider, home=tmp_path)
    session = s.session(user="ada")
    converse(session, ["Hi, I'm Ada", "more"])
    memory = s.store.snapshot(session.id).memory
    assert not any("Should the user model be updated?" in m.content for m in memory)
    thought = next(m for m in memory if m.entry_type == "internalMonologue")
    assert thought.meta["step"] == "think" and thought.meta["kind"] == "internal_monologue" and thought.meta["turn"] == 1
    system = provider.requests[1].messages[0].content
    assert "- [turn 1 · think, internal_monologue] She builds compilers" in system


def test_a_region_shows_its_newest_entries_up_to_its_limit_and_the_trace_says_what_dropped(tmp_path: Path) -> None:
    s, turns, _ = load(tmp_path, [reply(f"a{i}", thought=f"thought {i}") for i in range(5)], limit=2)
    result = converse(s.session(user="ada"), [f"m{i}" for i in range(5)])[-1]
    system = turns.requests[4].messages[0].content
    assert "thought 3" in system and "thought 2" in system and "thought 1" not in system
    cut = [c for c in result.trace.calls[0].cut if c["part"] == "working memory: default"]
    assert cut == [{"part": "working memory: default", "what": "2 oldest entries", "entries": 2, "why": "over the region's limit of 2"}]


def test_the_schema_refuses_a_history_that_is_not_turns_or_a_share(check: object) -> None:
    problems = check("""
        soul: x
        version: 1
        steps:
          reply: {uses: external_dialogue, history: {turns: -1, lines: 3}}
    """)  # type: ignore[operator]
    assert any("history" in p for p in problems)
