"""Fixy as a gate on any soul's reply (issue 14.3): `observer: {gate: true}` judges each reply
before it is sent and asks for at most one rewrite; a failed rewrite leaves the draft."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from conversation_souls import load, reply

from soul.runtime.events import FixyGated, Reply, Token

LOOP = "remarkable elegant felines purring softly"  # every line the same keywords: circular


def gated(folder: Path, main: list[str], observer: str = "observer: {gate: true}") -> tuple[Any, Any]:
    _, turns, _ = load(folder, main)
    path = folder / "talker.yaml"
    path.write_text(path.read_text() + observer + "\n")
    import soul

    return soul.load(path, provider={"main": turns, "cheap": turns}, home=folder / "home"), turns


def run(session: Any, messages: list[str]) -> list[Any]:
    async def go() -> list[Any]:
        events: list[Any] = []
        for m in messages:
            events.extend([e async for e in session.stream(m)])
        return events

    return asyncio.run(go())


def test_a_reply_that_goes_in_circles_is_rewritten_once_and_only_the_rewrite_is_shown(tmp_path: Path) -> None:
    s, turns = gated(tmp_path, [reply(LOOP), reply(f"{LOOP} DRAFT"), reply("Let us try a new angle: what do you feel?")])
    session = s.session(user="ada")
    events = run(session, [LOOP, LOOP])
    assert len(turns.requests) == 3  # first turn too early to judge; the second judged and asked again
    system = turns.requests[2].messages[0].content
    assert "## Rewrite" in system and "circular reasoning" in system and "DRAFT" in system
    shown = [e.text for e in events if isinstance(e, Reply | Token)]
    assert not any("DRAFT" in t for t in shown)
    assert [e for e in events if isinstance(e, FixyGated)] == [FixyGated(2, "talker", "circular_reasoning", True, None)]
    replies = [e.text for e in events if isinstance(e, Reply)]
    assert replies[-1] == "Let us try a new angle: what do you feel?"


def test_the_draft_stands_when_the_rewrite_fails(tmp_path: Path) -> None:
    # the rewrite is unreadable, and so is its re-ask: then the model has nothing left to say
    s, _ = gated(tmp_path, [reply(LOOP), reply(f"{LOOP} DRAFT"), "no sections at all"])
    session = s.session(user="ada")

    async def go() -> Any:
        await session.turn(LOOP)
        return await session.turn(LOOP)

    result = asyncio.run(go())
    assert result.reply == f"{LOOP} DRAFT"
    gate = [e for e in result.trace.events if e.get("event") == "fixy_gate"]
    assert [(g["reason"], g["rewritten"]) for g in gate] == [("circular_reasoning", False)]
    assert "ran out" in gate[0]["error"]  # the failure is recorded with the gate


def test_a_healthy_conversation_is_never_gated_and_costs_one_call_a_turn(tmp_path: Path) -> None:
    s, turns = gated(tmp_path, [reply("Tea is lovely."), reply("Mountains are tall."), reply("Why do rivers bend?")])
    events = run(s.session(user="ada"), ["hello there", "tell me about hiking", "and geography?"])
    assert len(turns.requests) == 3
    assert not [e for e in events if isinstance(e, FixyGated)]
    assert [e.text for e in events if isinstance(e, Reply)] == ["Tea is lovely.", "Mountains are tall.", "Why do rivers bend?"]


def test_without_the_block_or_with_gate_false_nothing_is_judged(tmp_path: Path) -> None:
    s, turns = gated(tmp_path, [reply(LOOP), reply(LOOP)], observer="observer: {gate: false}")
    events = run(s.session(user="ada"), [LOOP, LOOP])
    assert len(turns.requests) == 2 and not [e for e in events if isinstance(e, FixyGated)]
