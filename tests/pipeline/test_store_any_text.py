"""What SQLite stores, PostgreSQL stores: any Python text, NUL characters included, reads back
the same on both backends (PostgreSQL's TEXT refuses NUL; its adapter escapes it, issue 24.4)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from souls import claudius_reply
from store_backends import backend, store_url  # noqa: F401 - fixtures

import soul
from soul.providers import ScriptedProvider
from soul.records import (
    Commit,
    MemoryEntry,
    MessageRecord,
    MoodRecord,
    SummaryRecord,
    UserModelChange,
)
from soul.store import SessionStore
from soul.store.dialect import escape_text, unescape_text

# NUL alone, at the ends, twice, beside the escape's own characters, and what an escape must
# never confuse with one: the marker character and backslashes written by the user.
HOSTILE = [
    "\x00",
    "a\x00b",
    "\x00\x00 twice \x00",
    "\\0 is not a NUL",
    "\\\x00\\",
    "\ufffftext that opens with the marker",
    "\uffff\x00",
    "\uffff\\0",
    "ordinary text",
    "",
]


@pytest.fixture
def store(store_url: str | None) -> Iterator[SessionStore]:  # noqa: F811 - the fixture
    with SessionStore.open() as opened:
        yield opened


@pytest.mark.parametrize("text", HOSTILE)
def test_the_postgres_escape_round_trips_every_text(text: str) -> None:
    stored = escape_text(text)
    assert "\x00" not in stored
    assert unescape_text(stored) == text


def test_text_without_nul_or_marker_is_stored_as_it_is() -> None:
    assert escape_text("plain \\0 words") == "plain \\0 words"


def test_a_turn_with_nul_characters_everywhere_reads_back_the_same(store: SessionStore) -> None:
    nul = "before\x00after \x00"
    info = store.create_session("claudius", "ann\x00e")
    commit = Commit(
        info.id,
        0,
        messages=(
            MessageRecord("external", "user", f"user says {nul}"),
            MessageRecord("external", "external_dialogue", f"model says {nul}", "reply", f"verb{nul}", meta={"k\x00": nul}),
        ),
        state={"topic": nul, nul: [nul]},
        user_model=UserModelChange(f"# Ann {nul}", f"note {nul}"),
        memory=(MemoryEntry("scratch", "userMessage", f"memory {nul}", meta={"x": nul}),),
        chetana={"bhava": nul},
        trace={"turn": 1, "prompt": nul},
    )
    assert store.commit(commit) == 1
    external = [m for _, m, _ in store.messages(info.id)]
    assert [m.content for m in external] == [f"user says {nul}", f"model says {nul}"]
    assert external[1].verb == f"verb{nul}" and external[1].meta == {"k\x00": nul}
    snap = store.snapshot(info.id)
    assert snap.session.user == "ann\x00e"
    assert snap.state == {"topic": nul, nul: [nul]}
    assert snap.user_model == f"# Ann {nul}"
    assert [(m.content, m.meta) for m in snap.memory] == [(f"memory {nul}", {"x": nul})]
    assert snap.chetana == {"bhava": nul}
    assert store.trace(info.id, 1) == {"turn": 1, "prompt": nul}
    assert store.user_model("claudius", "ann\x00e").note == f"note {nul}"  # type: ignore[union-attr]
    assert [s.id for s in store.sessions("claudius")] == [info.id]


def test_a_cycle_with_nul_in_mood_and_summaries_reads_back_the_same(store: SessionStore) -> None:
    nul = "x\x00y"
    info = store.create_session("csd", "ann")
    store.commit(Commit(info.id, 0, messages=(MessageRecord("external", "user", "hi"),)))
    store.commit(
        Commit(
            info.id,
            1,
            kind="cycle",
            process="subconscious",
            cycle=1,
            mood=MoodRecord(f"mood {nul}", f"criteria {nul}"),
            summaries=(SummaryRecord("external", f"summary {nul}", 1, 1),),
        )
    )
    moods = store.moods(info.id)
    assert (moods[-1]["mood"], moods[-1]["criteria"]) == (f"mood {nul}", f"criteria {nul}")
    history = store.mind_history(info.id, "subconscious")
    assert history.summaries["external"].summary == f"summary {nul}"
    assert [m.mood for m in history.moods] == [f"mood {nul}"]


def test_a_turn_whose_message_and_reply_hold_nul_runs_on_both_backends(store_url: str | None, tmp_path: Path) -> None:  # noqa: F811
    # Before the escape, PostgreSQL failed the turn with psycopg's DataError (serve: 500).
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("reply \x00 with NUL")]), home=tmp_path)
    try:
        session = s.session(user="ada")
        result = asyncio.run(session.turn("user \x00 with NUL"))
        assert result.reply == "reply \x00 with NUL"
        said = [m.content for _, m, _ in s.store.messages(session.id, layer="external")]
        assert said == ["user \x00 with NUL", "reply \x00 with NUL"]
    finally:
        s.close()
