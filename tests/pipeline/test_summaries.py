"""Summaries of the conversation (issue 15.3): folded by the summary slot with the `summary`
kind's template and section, stored in context_summaries, restored when a session resumes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conversation_souls import converse, load, reply

import soul
from soul.providers import ScriptedProvider
from soul.runtime.conversation.summaries import read_summary


def test_a_summary_is_read_from_its_section_and_a_reply_of_other_sections_is_none() -> None:
    assert read_summary("<summary>Ada likes parsers.</summary>") == "Ada likes parsers."
    assert read_summary("Ada likes parsers.") == "Ada likes parsers."
    with pytest.raises(ValueError):
        read_summary('<external_dialogue verb="said">hello</external_dialogue>')
    with pytest.raises(ValueError):
        read_summary("   ")


def test_folding_uses_the_summary_kinds_template_and_stores_a_context_summary(tmp_path: Path) -> None:
    s, turns, summaries = load(tmp_path, [reply(f"r{i}") for i in range(15)], ["<summary>They greeted.</summary>"])
    session = s.session(user="ada")
    results = converse(session, [f"m{i}" for i in range(1, 16)])
    system = summaries.requests[0].messages[0].content
    assert "Summarise the conversation so far in at most 150 words" in system  # summary.j2
    assert "(turn 1) ada: m1" in summaries.requests[0].messages[1].content
    assert any(c.steps == ("history.summary",) for c in results[13].trace.calls)
    rows = sqlite3.connect(tmp_path / "home" / "soul.db").execute(
        "SELECT layer, summary, cycle_from, cycle_to, digest, process FROM context_summaries").fetchall()
    assert rows == [("conversation", "They greeted.", 1, 7, 0, None)]
    last = turns.requests[-1].messages
    assert "## Earlier in This Conversation\n(a summary of turns 1–7)\nThey greeted." in last[0].content
    assert last[1].content == "ada: m8"  # the kept turns follow the summary


def test_a_resumed_session_reads_its_summary_back(tmp_path: Path) -> None:
    s, _, _ = load(tmp_path, [reply(f"r{i}") for i in range(14)], ["<summary>Ada's cat is Tom.</summary>"])
    session = s.session(user="ada")
    converse(session, [f"m{i}" for i in range(1, 15)])
    again = ScriptedProvider([reply("welcome back")])
    resumed = soul.load(tmp_path / "talker.yaml", provider={"main": again, "cheap": ScriptedProvider([])}, home=tmp_path / "home")
    converse(resumed.session(session.id), ["remember my cat?"])
    messages = again.requests[0].messages
    assert "Ada's cat is Tom." in messages[0].content and messages[1].content == "ada: m8"
