"""The truncation digest (no summary model, or its call failed) keeps the most recent entries,
a sample across the rest and the start of the earlier digest, bounded, and says what it holds
(issue 24, 15d). Before, it kept the oldest 2,000 characters: after 140 turns, a digest
"of turns 1–140" held turns 1–12 and nothing since."""

from __future__ import annotations

import re
from pathlib import Path

from conversation_souls import converse, load, reply

from soul.runtime.conversation.summaries import DIGEST_CHARS, truncation_digest


def lines(first: int, last: int) -> list[str]:
    return [f"(turn {i}) ada: message number {i} about parsers and grammars\ntalker: reply {i}" for i in range(first, last + 1)]


def turns_in(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\(turn (\d+)\)", text)]


def test_a_digest_keeps_the_most_recent_and_a_sample_across_and_says_so() -> None:
    text = truncation_digest(None, lines(1, 140), noun="turn")
    assert len(text) <= DIGEST_CHARS
    held = turns_in(text)
    assert 140 in held and 139 in held  # the most recent
    assert 1 in held  # the first
    assert any(30 <= n <= 110 for n in held)  # and across the middle
    assert held == sorted(held)  # in order
    header = text.split("\n", 1)[0]
    assert header.startswith("[a digest, not a summary:") and "of 140 turns" in header


def test_a_digest_folded_again_keeps_the_earlier_start_and_the_new_end() -> None:
    first = truncation_digest(None, lines(1, 70), noun="turn")
    second = truncation_digest(first, lines(71, 140), noun="turn")
    assert len(second) <= DIGEST_CHARS
    held = turns_in(second)
    assert 1 in held and 140 in held and any(71 <= n <= 130 for n in held)
    assert second.count("[a digest, not a summary:") == 1  # the earlier header is not nested
    assert "the start of the earlier digest" in second.split("\n", 1)[0]


def test_a_huge_entry_cannot_crowd_out_the_rest() -> None:
    entries = lines(1, 10)
    entries[9] = "(turn 10) " + "x" * 1_000_000
    text = truncation_digest("an earlier summary " * 10_000, entries, noun="turn")
    assert len(text) <= DIGEST_CHARS and 1 in turns_in(text) and 10 in turns_in(text)


def test_a_long_conversation_without_a_summary_model_shows_its_recent_turns_in_the_digest(tmp_path: Path) -> None:
    messages = [f"m{i} about parsers" for i in range(1, 81)]
    s, turns, _ = load(tmp_path, [reply(f"r{i}") for i in range(80)], [], window=1800, reserve=200)  # the summary call fails
    converse(s.session(user="ada"), messages)
    system = turns.requests[-1].messages[0].content
    earlier = system.split("## Earlier in This Conversation", 1)[1]
    covered = re.search(r"\(a digest of turns (\d+)–(\d+)\)", earlier)
    assert covered is not None
    last = int(covered.group(2))
    assert f"(turn {last}) " in earlier and f"(turn {last - 1}) " in earlier  # its most recent turns
