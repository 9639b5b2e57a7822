"""Background processes in the store: cycle commits beside turns, moods, summaries, their
JSONL lines, what a process resumes from, and the migration of an older database."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backends import backend, store_url  # noqa: F401 - fixtures

from soul.errors import StaleTurn, StoreError
from soul.records import Commit, MessageRecord, MoodRecord, SummaryRecord
from soul.store import REDACTED, MindHistory, SessionStore, logs, migrations
from soul.store.home import db_path, session_logs_dir


@pytest.fixture
def store(store_url: str | None) -> Iterator[SessionStore]:  # noqa: F811 - the fixture
    with SessionStore.open() as opened:
        yield opened


def a_turn(session_id: str, base: int, *, cycle: int | None = None) -> Commit:
    return Commit(
        session_id,
        base,
        messages=(
            MessageRecord("external", "user", f"hello {base}"),
            MessageRecord("internal", "id_quiet", f"quiet {base}", "think"),
            MessageRecord("external", "external_dialogue", f"reply {base}", "reply", "said"),
        ),
        state={"n": base},
        trace={"turn": base},
        process="subconscious" if cycle is not None else None,
        cycle=cycle,
    )


def a_cycle(
    session_id: str,
    cycle: int,
    *,
    base: int = 0,
    process: str = "subconscious",
    mood: MoodRecord | None = None,
    summaries: tuple[SummaryRecord, ...] = (),
) -> Commit:
    return Commit(
        session_id,
        base,
        messages=(
            MessageRecord("subconscious", "s_loud", f"impulse {cycle}", "sub"),
            MessageRecord("subconscious", "s_quiet", f"undercurrent {cycle}", "sub"),
        ),
        trace={"cycle": cycle},
        kind="cycle",
        process=process,
        cycle=cycle,
        mood=mood,
        summaries=summaries,
    )


def log_files(session_id: str) -> dict[str, bytes]:
    folder = session_logs_dir(session_id)
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.jsonl"))}


# -- committing cycles beside turns ---------------------------------------------------------


def test_cycles_interleave_with_turns_without_stale_turns_or_advancing(
    store: SessionStore,
) -> None:
    sid = store.create_session("agentcsd", "ann").id
    assert store.commit(a_cycle(sid, 1)) == 0  # before any turn: stamped with turn 0
    assert store.commit(a_turn(sid, 0, cycle=1)) == 1
    # A cycle that started at turn 0 lands after turn 1: no StaleTurn, the count stays.
    assert store.commit(a_cycle(sid, 2, base=0)) == 1
    assert store.commit(a_cycle(sid, 3, base=7)) == 1
    assert store.session(sid).turns == 1
    assert store.commit(a_turn(sid, 1, cycle=3)) == 2
    with pytest.raises(StaleTurn):  # turns are still compare-and-set
        store.commit(a_turn(sid, 1))
    rows = store.connection.execute(
        "SELECT kind, turn, process, cycle FROM commits WHERE session_id = ? ORDER BY id", (sid,)
    ).fetchall()
    assert rows == [
        ("cycle", 0, "subconscious", 1),
        ("message", 1, "subconscious", 1),
        ("cycle", 1, "subconscious", 2),
        ("cycle", 1, "subconscious", 3),
        ("message", 2, "subconscious", 3),
    ]
    cycles = store.connection.execute(
        "SELECT tag, turn, cycle FROM messages WHERE session_id = ? AND layer = 'subconscious'"
        " ORDER BY id",
        (sid,),
    ).fetchall()
    assert cycles[:2] == [("s_loud", 0, 1), ("s_quiet", 0, 1)]
    assert cycles[-2:] == [("s_loud", 1, 3), ("s_quiet", 1, 3)]
    turn_cycles = store.connection.execute(
        "SELECT DISTINCT cycle FROM messages WHERE session_id = ? AND tag = 'user'", (sid,)
    ).fetchall()
    assert turn_cycles == [(1,), (3,)]  # a turn's messages carry the cycle it saw


def test_a_turn_of_a_session_without_processes_has_no_cycle(store: SessionStore) -> None:
    sid = store.create_session("claudius", "ann").id
    store.commit(a_turn(sid, 0))
    assert store.connection.execute(
        "SELECT DISTINCT cycle FROM messages WHERE session_id = ?", (sid,)
    ).fetchall() == [(None,)]
    line = logs.read(session_logs_dir(sid), "external_dialog")[0]
    assert list(line) == ["commit", "turn", "time", "tag", "step", "verb", "content", "meta"]


def test_a_cycle_commit_must_name_its_process_and_cycle(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    with pytest.raises(StoreError, match="needs its process and cycle"):
        store.commit(Commit(sid, 0, kind="cycle", process="subconscious"))
    with pytest.raises(StoreError, match="needs its process and cycle"):
        store.commit(Commit(sid, 0, kind="cycle", cycle=1))


@pytest.mark.parametrize("change", [{"state": {"x": 1}}, {"chetana": {"c": 1}}])
def test_a_cycle_carrying_a_full_state_is_refused_not_lost(
    store: SessionStore, change: dict[str, Any]
) -> None:
    sid = store.create_session("agentcsd", "ann").id
    with pytest.raises(StoreError, match="overwrite one committed meanwhile"):
        store.commit(Commit(sid, 0, kind="cycle", process="sub", cycle=1, **change))
    assert store.connection.execute("SELECT count(*) FROM commits").fetchone()[0] == 0


def test_mood_and_summaries_rows(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.commit(a_turn(sid, 0))
    store.commit(
        a_cycle(
            sid,
            4,
            mood=MoodRecord("wary", "be brief"),
            summaries=(
                SummaryRecord("S_loud_history", "[Previous summary]: a", 1, 3),
                SummaryRecord("S_quiet_history", "cut to the last 20", 1, 3, digest=True),
            ),
        )
    )
    conn = store.connection
    assert conn.execute(
        "SELECT mood, criteria, turn, cycle, process FROM mood_and_criteria"
    ).fetchall() == [("wary", "be brief", 1, 4, "subconscious")]
    assert conn.execute(
        "SELECT layer, summary, cycle_from, cycle_to, digest, process, turn_from, turn_to"
        " FROM context_summaries ORDER BY id"
    ).fetchall() == [
        ("S_loud_history", "[Previous summary]: a", 1, 3, 0, "subconscious", 1, 1),
        ("S_quiet_history", "cut to the last 20", 1, 3, 1, "subconscious", 1, 1),
    ]
    assert store.moods(sid) == [
        {
            "mood": "wary",
            "criteria": "be brief",
            "cycle": 4,
            "process": "subconscious",
            "turn": 1,
            "time": store.moods(sid)[0]["time"],
        }
    ]


# -- the JSONL mirror ---------------------------------------------------------------------


def test_cycle_lines_land_in_their_files_with_their_cycle(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.commit(a_turn(sid, 0))
    store.commit(
        a_cycle(
            sid,
            2,
            mood=MoodRecord("curious", "ask one thing"),
            summaries=(SummaryRecord("S_loud_history", "[Previous summary]: x", 1, 1),),
        )
    )
    folder = session_logs_dir(sid)
    sub = logs.read(folder, "subconscious")
    assert [(x["tag"], x["cycle"], x["turn"]) for x in sub] == [
        ("s_loud", 2, 1),
        ("s_quiet", 2, 1),
    ]
    (mood,) = logs.read(folder, "mood_and_criteria")
    assert {k: mood[k] for k in ("mood", "criteria", "cycle", "process", "turn")} == {
        "mood": "curious",
        "criteria": "ask one thing",
        "cycle": 2,
        "process": "subconscious",
        "turn": 1,
    }
    assert mood["commit"] == sub[0]["commit"] and isinstance(mood["time"], float)
    (summary,) = logs.read(folder, "context_summaries")
    assert summary["layer"] == "S_loud_history" and summary["summary"].endswith("x")
    assert (summary["cycle_from"], summary["cycle_to"], summary["digest"]) == (1, 1, False)
    event = logs.read(folder, "events")[-1]
    assert event["tag"] == "commit" and event["content"] == "cycle" and event["cycle"] == 2
    assert event["meta"]["process"] == "subconscious" and event["meta"]["mood"] is True
    assert event["meta"]["summaries"] == 1


def test_deleted_logs_are_rebuilt_identically_from_the_database(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.commit(a_cycle(sid, 1, mood=MoodRecord("calm", "listen")))
    store.commit(a_turn(sid, 0, cycle=1))
    store.commit(
        a_cycle(
            sid,
            2,
            mood=MoodRecord("restless", "push"),
            summaries=(SummaryRecord("ID_quiet_history", "[Previous summary]: y", 1, 2, True),),
        )
    )
    store.commit(a_turn(sid, 1, cycle=2))
    before = log_files(sid)
    assert {"mood_and_criteria.jsonl", "context_summaries.jsonl", "subconscious.jsonl"} <= set(
        before
    )
    shutil.rmtree(session_logs_dir(sid))
    # A fresh mirror: the cursor back to nothing logged, as for a home whose logs were lost.
    store.connection.execute("UPDATE sessions SET logged_commit = 0 WHERE id = ?", (sid,))
    assert store.repair_logs() == [sid]
    assert log_files(sid) == before


def test_a_secret_in_mood_criteria_or_summary_is_stored_nowhere(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("PROVIDER_API_KEY", secret)
    sid = store.create_session("agentcsd", "ann").id
    store.commit(
        a_cycle(
            sid,
            1,
            mood=MoodRecord(f"mood {secret}", f"criteria {secret}"),
            summaries=(SummaryRecord("S_loud_history", f"summary {secret}", 1, 1),),
        )
    )
    conn = store.connection
    assert conn.execute("SELECT mood, criteria FROM mood_and_criteria").fetchone() == (
        f"mood {REDACTED}",
        f"criteria {REDACTED}",
    )
    assert conn.execute("SELECT summary FROM context_summaries").fetchone() == (
        f"summary {REDACTED}",
    )
    assert all(secret.encode() not in data for data in log_files(sid).values())
    for path in db_path().parent.glob("soul.db*"):  # the database and its WAL
        assert secret.encode() not in path.read_bytes()


# -- resuming a process ---------------------------------------------------------------------


def test_mind_history_round_trips(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    empty = store.mind_history(sid, "subconscious")
    assert (empty.cycles, empty.last_cycle_commit, empty.messages, empty.moods) == (0, 0, (), ())
    store.commit(a_cycle(sid, 1, mood=MoodRecord("calm", "listen")))
    store.commit(a_turn(sid, 0, cycle=1))
    store.commit(
        a_cycle(
            sid,
            2,
            mood=MoodRecord("warm", "stay"),
            summaries=(SummaryRecord("S_loud_history", "first", 1, 1),),
        )
    )
    store.commit(a_cycle(sid, 1, process="dreamer", mood=MoodRecord("odd", "drift")))
    store.commit(
        a_cycle(sid, 3, summaries=(SummaryRecord("S_loud_history", "second", 1, 2, True),))
    )
    store.commit(a_turn(sid, 1, cycle=3))
    history = store.mind_history(sid, "subconscious")
    assert isinstance(history, MindHistory)
    last_cycle = store.connection.execute(
        "SELECT max(id) FROM commits WHERE process = 'subconscious' AND kind = 'cycle'"
    ).fetchone()[0]
    assert (history.cycles, history.last_cycle_commit) == (3, last_cycle)
    # Every layer and every process, in commit order, as the store holds them.
    assert [(m.tag, m.cycle, m.turn, m.kind, m.process) for m in history.messages] == [
        ("s_loud", 1, 0, "cycle", "subconscious"),
        ("s_quiet", 1, 0, "cycle", "subconscious"),
        ("user", 1, 1, "message", "subconscious"),
        ("id_quiet", 1, 1, "message", "subconscious"),
        ("external_dialogue", 1, 1, "message", "subconscious"),
        ("s_loud", 2, 1, "cycle", "subconscious"),
        ("s_quiet", 2, 1, "cycle", "subconscious"),
        ("s_loud", 1, 1, "cycle", "dreamer"),
        ("s_quiet", 1, 1, "cycle", "dreamer"),
        ("s_loud", 3, 1, "cycle", "subconscious"),
        ("s_quiet", 3, 1, "cycle", "subconscious"),
        ("user", 3, 2, "message", "subconscious"),
        ("id_quiet", 3, 2, "message", "subconscious"),
        ("external_dialogue", 3, 2, "message", "subconscious"),
    ]
    since = [m.tag for m in history.messages if m.commit_id > history.last_cycle_commit]
    assert since == ["user", "id_quiet", "external_dialogue"]
    assert history.messages[4].verb == "said" and history.messages[4].step == "reply"
    assert [(m.mood, m.criteria, m.cycle, m.turn) for m in history.moods] == [
        ("calm", "listen", 1, 0),
        ("warm", "stay", 2, 1),
    ]
    assert history.summaries == {"S_loud_history": SummaryRecord("S_loud_history", "second", 1, 2, True)}
    assert not history.truncated
    dreamer = store.mind_history(sid, "dreamer")
    assert (dreamer.cycles, [m.mood for m in dreamer.moods], dreamer.summaries) == (1, ["odd"], {})
    # Reopening reads the same.
    with SessionStore.open() as again:
        assert again.mind_history(sid, "subconscious") == history


def test_mind_history_reads_a_bounded_window(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    for n in range(1, 6):
        store.commit(a_cycle(sid, n, mood=MoodRecord(f"m{n}", "c")))
    window = store.mind_history(sid, "subconscious", messages=3, moods=2)
    assert window.truncated and window.cycles == 5
    assert [(m.tag, m.cycle) for m in window.messages] == [
        ("s_quiet", 4),
        ("s_loud", 5),
        ("s_quiet", 5),
    ]
    assert [m.mood for m in window.moods] == ["m4", "m5"]
    assert not store.mind_history(sid, "subconscious", messages=10).truncated


def test_export_holds_moods_summaries_and_cycles(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.commit(
        a_cycle(
            sid,
            1,
            mood=MoodRecord("calm", "listen"),
            summaries=(SummaryRecord("S_quiet_history", "digest", 0, 1, True),),
        )
    )
    data = store.export_session(sid)
    assert [m["cycle"] for m in data["messages"]] == [1, 1]
    assert [(m["mood"], m["cycle"], m["process"]) for m in data["moods"]] == [
        ("calm", 1, "subconscious")
    ]
    assert [(s["layer"], s["digest"], s["cycle_to"]) for s in data["summaries"]] == [
        ("S_quiet_history", True, 1)
    ]


# -- a cycle applied once (what a durable runner's retry relies on) ----------------------------


def test_a_cycle_committed_once_is_not_applied_again(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    store.commit(a_turn(sid, 0))
    cycle = a_cycle(sid, 1, mood=MoodRecord("calm", "be kind"))
    assert store.commit(cycle, once=True) == 1
    before = (store.export_session(sid), log_files(sid))
    store.commit(a_turn(sid, 1))  # the count moves on; the re-run still reports its stamp
    after_turn = (store.export_session(sid), log_files(sid))
    assert store.commit(cycle, once=True) == 1
    assert (store.export_session(sid), log_files(sid)) == after_turn != before
    assert store.mind_history(sid, "subconscious").cycles == 1
    assert len(store.moods(sid)) == 1
    # Another process's cycle 1, and this process's cycle 2, are new.
    assert store.commit(a_cycle(sid, 1, process="dreams"), once=True) == 2
    assert store.commit(a_cycle(sid, 2), once=True) == 2
    assert store.mind_history(sid, "subconscious").cycles == 2


def test_once_is_refused_for_a_turn(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    with pytest.raises(StoreError, match="once=True is for cycle commits"):
        store.commit(a_turn(sid, 0), once=True)


def test_two_stores_racing_one_cycle_apply_it_once(store: SessionStore) -> None:
    sid = store.create_session("agentcsd", "ann").id
    other = SessionStore.open(store.home)
    try:
        for n in range(1, 11):
            gate = threading.Barrier(2)

            def run(s: SessionStore, n: int = n, gate: threading.Barrier = gate) -> None:
                gate.wait()
                s.commit(a_cycle(sid, n), once=True)

            threads = [threading.Thread(target=run, args=(s,)) for s in (store, other)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        cycles = [
            r[0]
            for r in store.connection.execute(
                "SELECT cycle FROM commits WHERE session_id = ? ORDER BY id", (sid,)
            )
        ]
        assert cycles == list(range(1, 11))
    finally:
        other.close()


# -- migrating an older database ------------------------------------------------------------


def test_an_older_database_is_migrated_with_its_rows_intact(
    soul_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = migrations.MIGRATIONS[0]
    with monkeypatch.context() as old:
        old.setattr(migrations, "MIGRATIONS", [first])
        conn = sqlite3.connect(db_path(soul_home), isolation_level=None)
        assert migrations.migrate(conn) == [first.__name__]
        conn.execute(
            "INSERT INTO sessions (id, soul, user, turns, logged_commit, created, updated)"
            " VALUES ('old', 'agentcsd', 'ann', 1, 0, 1.0, 1.0)"
        )
        conn.execute(
            "INSERT INTO commits (session_id, turn, kind, time, meta)"
            " VALUES ('old', 1, 'message', 1.0, '{\"kind\":\"message\"}')"
        )
        conn.execute(
            "INSERT INTO messages (session_id, commit_id, turn, layer, tag, content, time)"
            " VALUES ('old', 1, 1, 'external', 'user', 'from before', 1.0)"
        )
        conn.execute(
            "INSERT INTO mood_and_criteria (session_id, mood, criteria, turn, time)"
            " VALUES ('old', 'older mood', 'older criteria', 1, 1.0)"
        )
        conn.execute(
            "INSERT INTO context_summaries (session_id, layer, summary, turn_from, turn_to, time)"
            " VALUES ('old', 'ID_quiet_history', 'older summary', 0, 1, 1.0)"
        )
        conn.close()
    with SessionStore.open(soul_home) as store:
        names = migrations.applied(store.connection)
        assert names == [m.__name__ for m in migrations.MIGRATIONS]
        assert "m002_background_processes" in names
        conn = store.connection
        assert conn.execute("SELECT content, cycle FROM messages").fetchall() == [
            ("from before", None)
        ]
        assert conn.execute(
            "SELECT summary, turn_from, turn_to, digest, cycle_from FROM context_summaries"
        ).fetchall() == [("older summary", 0, 1, 0, None)]
        assert [m["mood"] for m in store.moods("old")] == ["older mood"]
        # Its logs were repaired at open from the migrated rows, and it takes new commits.
        assert logs.read(session_logs_dir("old"), "external_dialog")[0]["content"] == "from before"
        assert store.commit(a_cycle("old", 1, mood=MoodRecord("new", "c"))) == 1
        assert store.commit(a_turn("old", 1, cycle=1)) == 2
        history = store.mind_history("old", "subconscious")
        assert history.cycles == 1 and history.messages[0].content == "from before"
        assert history.messages[0].cycle is None and history.messages[0].kind == "message"
