"""The built-in souls through the testing kit: scripted conversations, snapshotted turn by turn.

The snapshots under `__snapshots__/test_souls_kit/` are the souls' whole prompts and parsed
steps; a change to a template, persona or step kind shows up there as a readable diff.
Re-record the cassette with `pytest tests/providers/test_souls_kit.py --soul-record`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("syrupy")

Converse = Callable[..., Any]


def claudius(text: str, check: str = "false", update: str = "") -> str:
    reply = (
        '<internal_monologue verb="pondered">A craftsman weighs the question first.</internal_monologue>\n'
        f'<external_dialogue verb="remarked">{text}</external_dialogue>\n'
        f"<user_model_check>{check}</user_model_check>\n"
    )
    if update:
        reply += f"<user_model_update>{update}</user_model_update>\n<model_change_note>Learned their trade.</model_change_note>\n"
    return reply


CLAUDIUS = [
    claudius("Hello. What are you building?"),
    claudius("A compiler — a noble way to suffer.", "true", "# Ada\n\n## Persona\nBuilds compilers."),
    claudius(
        "Start with the lexer; everything else trusts it.",
    ) + "<soul_state_check>true</soul_state_check>\n<soul_state_update>emotionalState: engaged\ncurrentTopic: compilers</soul_state_update>\n",
]

SAMANTHA = [
    '<internal_monologue verb="wondered">Someone new. I wonder what they care about.</internal_monologue>',
    "<decision>ask a question</decision><decision_reason>I know nothing about them yet.</decision_reason>",
    '<external_dialogue verb="said">Hi! What has been on your mind lately?</external_dialogue>',
    "<mental_query>true</mental_query>",
    "<user_model_update># User\n\n## Interests & Domains\nGardening.</user_model_update>"
    "<model_change_note>They garden.</model_change_note>",
]


def test_claudius_three_turns(soul_conversation: Converse, soul_snapshot: Any) -> None:
    transcript = soul_conversation(
        "claudius", ["Hello", "I'm Ada; I build compilers.", "Where should I start?"], replies=CLAUDIUS, user="ada"
    )
    assert transcript.replies[1] == "A compiler — a noble way to suffer."
    assert transcript.turns[1].steps["user_update"]["model"].startswith("# Ada")
    assert transcript.turns[2].state_changes["emotionalState"] == ("neutral", "engaged")
    assert transcript == soul_snapshot


def test_samantha_learns_about_the_user(soul_conversation: Converse, soul_snapshot: Any) -> None:
    transcript = soul_conversation("samantha", ["Hi! I spent the day in my garden."], replies=SAMANTHA)
    turn = transcript.turns[0]
    assert turn.reply == "Hi! What has been on your mind lately?"
    assert "+Gardening." in turn.user_model_diff  # written by the after-turn subprocess
    assert transcript == soul_snapshot


def test_claudius_from_a_cassette(soul_conversation: Converse) -> None:
    transcript = soul_conversation("claudius", ["Hello"], replies=CLAUDIUS[:1], cassette="cassettes/claudius-hello.yaml")
    assert transcript.replies == ["Hello. What are you building?"]
