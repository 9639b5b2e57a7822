"""A session through time and forked at a turn (issue 27, items 5 and 6), on both backends:
the layers as they were after any turn, every commit and its trace, and a fork whose history,
user model, state and mood are those after turn N while the original stays as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from store_backends import backend, store_url  # noqa: F401 - fixtures

from soul.errors import StoreError
from soul.records import Commit, MemoryEntry, MessageRecord, MoodRecord, UserModelChange
from soul.store.home import session_logs_dir
from soul.store.sessions import SessionStore


@pytest.fixture
def store(store_url: str | None) -> Iterator[SessionStore]:  # noqa: F811 - the fixture
    with SessionStore.open() as opened:
        yield opened


def turn(store: SessionStore, sid: str, n: int, **changes: Any) -> int:
    messages = (MessageRecord("external", "user", f"hello {n}"),
                MessageRecord("internal", "internal_monologue", f"thinking {n}", "think", "pondered"),
                MessageRecord("external", "external_dialogue", f"reply {n}", "reply", "said"))
    memory = (MemoryEntry("default", "userMessage", f"hello {n}", meta={"turn": n}),)
    return store.commit(Commit(sid, n - 1, messages=messages, memory=memory, trace={"turn": n, "calls": [], "n": n},
                               **changes))


def cycle(store: SessionStore, sid: str, number: int, mood: str) -> None:
    store.commit(Commit(sid, 0, kind="cycle", process="subconscious", cycle=number, mood=MoodRecord(mood, f"criteria {number}"),
                        messages=(MessageRecord("subconscious", "S_quiet", f"quiet {number}"),), trace={"kind": "cycle"}))


def history(store: SessionStore, sid: str) -> list[tuple[int, str]]:
    return [(t, m.content) for t, m, _ in store.messages(sid)]


@pytest.fixture
def four_turns(store: SessionStore) -> str:
    sid = store.create_session("claudius", "ada").id
    turn(store, sid, 1, state={"topic": "one"})
    cycle(store, sid, 1, "calm")
    turn(store, sid, 2, state={"topic": "two"}, user_model=UserModelChange("## Ada\nbuilds compilers", "first"))
    turn(store, sid, 3, user_model=UserModelChange("## Ada\nbuilds compilers\nparser is slow", "second"),
         chetana={"affect": 3})
    cycle(store, sid, 2, "worried")
    turn(store, sid, 4, state={"topic": "four"}, user_model=UserModelChange("## Ada\nwants to stop", "third"))
    return sid


def test_the_layers_after_any_turn_are_as_they_were(store: SessionStore, four_turns: str) -> None:
    now = store.layers(four_turns)
    assert now["now"] and now["turn"] == 4 and now["state"] == {"topic": "four"}
    assert now["user_model"]["version"] == 3 and now["user_model"]["text"] == "## Ada\nwants to stop"
    assert [v["version"] for v in now["user_model"]["versions"]] == [1, 2, 3]
    assert now["mood"]["mood"] == "worried"
    two = store.layers(four_turns, 2)
    assert not two["now"] and two["state"] == {"topic": "two"} and two["state_known"]
    assert two["user_model"]["version"] == 1 and two["user_model"]["text"] == "## Ada\nbuilds compilers"
    assert [e["content"] for e in two["memory"]["default"]] == ["hello 1", "hello 2"]
    assert two["mood"]["mood"] == "calm"
    three = store.layers(four_turns, 3)
    assert three["state"] == {"topic": "two"}  # turn 3 changed no state: turn 2's stands
    assert store.layers(four_turns, 0)["state"] is None and store.layers(four_turns, 0)["user_model"]["version"] == 0
    with pytest.raises(StoreError, match="there is no turn 9"):
        store.layers(four_turns, 9)


def test_every_commit_is_listed_and_its_trace_read_by_commit(store: SessionStore, four_turns: str) -> None:
    commits = store.commit_list(four_turns)
    assert [(c["turn"], c["kind"], c["cycle"]) for c in commits] == [
        (1, "message", None), (1, "cycle", 1), (2, "message", None), (3, "message", None), (3, "cycle", 2), (4, "message", None)]
    cycle_commit = commits[1]["commit"]
    assert store.commit_trace(four_turns, cycle_commit) == {"kind": "cycle"}
    assert store.commit_trace(four_turns, commits[2]["commit"])["n"] == 2
    with pytest.raises(StoreError, match="has no commit"):
        store.commit_trace(four_turns, 10**9)


def test_a_fork_is_the_session_after_turn_n_and_the_original_is_untouched(store: SessionStore, four_turns: str) -> None:
    before = store.export_session(four_turns)
    fork = store.fork_session(four_turns, 2)
    assert fork.id != four_turns and fork.turns == 2 and fork.forked_from == four_turns and fork.forked_at == 2
    assert store.session(fork.id).forked_from == four_turns
    assert history(store, fork.id) == [(1, "hello 1"), (1, "thinking 1"), (1, "reply 1"), (1, "quiet 1"),
                                       (2, "hello 2"), (2, "thinking 2"), (2, "reply 2")]
    snap = store.snapshot(fork.id)
    assert snap.state == {"topic": "two"} and snap.user_model == "## Ada\nbuilds compilers" and snap.user_model_version == 1
    assert [m.content for m in snap.memory] == ["hello 1", "hello 2"]
    assert snap.chetana is None  # Chetana first changed at turn 3
    assert store.layers(fork.id)["mood"]["mood"] == "calm"
    assert [t["trace"]["n"] for t in store.traces(fork.id) if "n" in t["trace"]] == [1, 2]
    # the fork goes on: its turn 3 and its user model are its own
    turn(store, fork.id, 3, state={"topic": "elsewhere"}, user_model=UserModelChange("## Ada\nlikes tea", "fork's"))
    assert store.snapshot(fork.id).user_model == "## Ada\nlikes tea"
    assert store.snapshot(four_turns).user_model == "## Ada\nwants to stop"
    after = store.export_session(four_turns)
    assert after == before
    assert [v.version for v in store.user_model_history("claudius", "ada")] == [1, 2, 3]
    # its logs were written from the copied rows
    folder = session_logs_dir(fork.id, store.home)
    assert "reply 2" in "".join(f.read_text() for f in folder.glob("*.jsonl"))


def test_a_fork_of_a_fork_and_at_the_ends(store: SessionStore, four_turns: str) -> None:
    latest = store.fork_session(four_turns, 4)
    assert store.snapshot(latest.id).state == {"topic": "four"} and store.snapshot(latest.id).chetana == {"affect": 3}
    empty = store.fork_session(four_turns, 0)
    assert store.messages(empty.id) == [] and store.snapshot(empty.id).user_model == "" and store.snapshot(empty.id).state == {}
    again = store.fork_session(latest.id, 3)
    assert again.forked_from == latest.id and store.snapshot(again.id).user_model == "## Ada\nbuilds compilers\nparser is slow"
    with pytest.raises(StoreError, match="cannot be forked at turn 5"):
        store.fork_session(four_turns, 5)
    with pytest.raises(StoreError, match="cannot be forked at turn -1"):
        store.fork_session(four_turns, -1)


def test_a_state_changed_before_states_were_kept_refuses_an_earlier_fork(store: SessionStore, four_turns: str) -> None:
    def forget(conn: Any) -> None:  # as a session committed before migration m003 reads
        conn.execute("UPDATE commits SET state = NULL WHERE session_id = ?", (four_turns,))

    store._write(forget)
    with pytest.raises(StoreError, match="fork it at turn 4, its latest"):
        store.fork_session(four_turns, 2)
    assert store.layers(four_turns, 2)["state_known"] is False
    assert store.snapshot(store.fork_session(four_turns, 4).id).state == {"topic": "four"}


def test_commit_rows_keep_the_state_they_carried(store: SessionStore, four_turns: str) -> None:
    def read(conn: Any) -> list[Any]:
        return conn.execute("SELECT state FROM commits WHERE session_id = ? ORDER BY id", (four_turns,)).fetchall()

    rows = store._write(read)
    assert [json.loads(r[0]) if r[0] else None for r in rows] == [
        {"topic": "one"}, None, {"topic": "two"}, None, None, {"topic": "four"}]


def test_soul_sessions_fork_and_the_forks_own_user_model(store: SessionStore, four_turns: str, capsys: pytest.CaptureFixture[str]) -> None:
    from soul.cli.main import main

    assert main(["sessions", "fork", four_turns[:8], "--at", "2"]) == 0
    out = capsys.readouterr().out
    fork = out.split("new session ")[1].split()[0]
    assert f"forked session {four_turns} after turn 2" in out and f"soul run claudius --session {fork}" in out
    assert main(["sessions", "show", fork]) == 0
    shown = capsys.readouterr().out
    assert f"forked from session {four_turns} after its turn 2" in shown and "[2] claudius: reply 2" in shown
    assert "reply 3" not in shown
    assert main(["user-model", "history", "claudius", "--session", fork]) == 0
    assert capsys.readouterr().out.count("\nv") + 1 == 1  # one version: the one current after turn 2
    assert main(["user-model", "revert", "claudius", "--session", fork, "--version", "1"]) == 0
    assert "a copy of v1" in capsys.readouterr().out
    assert [v.version for v in store.user_model_history("claudius", "ada")] == [1, 2, 3]  # the original's line
    assert main(["sessions", "fork", four_turns, "--at", "7"]) != 0
    assert "cannot be forked at turn 7" in capsys.readouterr().err


def test_a_forked_soul_session_continues_from_turn_n(store: SessionStore) -> None:
    import soul
    from soul.providers import ScriptedProvider

    def reply(text: str) -> str:
        return (f'<internal_monologue verb="noted">t</internal_monologue><external_dialogue verb="said">{text}</external_dialogue>'
                "<user_model_check>false</user_model_check><soul_state_check>false</soul_state_check>")

    provider = ScriptedProvider([reply(f"answer {i}") for i in range(1, 5)] + [reply("fork answer")])
    with soul.load("claudius", provider=provider) as s:
        session = s.session(user="ada")
        for i in range(1, 5):
            session.turn_sync(f"message {i}")
        fork = s.store.fork_session(session.id, 2)
        resumed = s.session(fork.id)
        result = resumed.turn_sync("after the fork")
        prompt = "\n".join(m.content for m in provider.requests[-1].messages)
    assert result.turn == 3 and result.reply == "fork answer"
    assert "message 2" in prompt and "message 3" not in prompt and "answer 3" not in prompt
    assert s.store.session(session.id).turns == 4
