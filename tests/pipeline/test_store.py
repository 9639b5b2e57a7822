"""The session store: sessions, commits, snapshots, user models, export, resume, all-or-nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backends import backend, sqlite_only, store_url  # noqa: F401 - fixtures

from soul.errors import SoulError
from soul.records import Commit, MemoryEntry, MessageRecord, UserModelChange
from soul.store import logs
from soul.store.home import session_logs_dir, soul_home
from soul.store.sessions import SessionNotFound, SessionStore, StaleTurn, StoreError


@pytest.fixture
def store(store_url: str | None) -> Iterator[SessionStore]:  # noqa: F811 - the fixture
    with SessionStore.open() as opened:
        yield opened


def turn_commit(session_id: str, base: int, n: int = 0, **changes: Any) -> Commit:
    """A typical turn: the user's message, a thought, the reply, a user-model check."""
    messages = (
        MessageRecord("external", "user", f"hello {n}"),
        MessageRecord("internal", "internal_monologue", f"thinking {n}", "think", "pondered"),
        MessageRecord("external", "external_dialogue", f"reply {n}", "reply", "said"),
        MessageRecord(
            "internal", "user_model_check", "false", "check", meta={"result": n % 2 == 1}
        ),
    )
    return Commit(
        session_id,
        base,
        messages=messages,
        state=changes.pop("state", {"currentTopic": f"topic {n}"}),
        trace=changes.pop("trace", {"turn": n, "steps": ["think", "reply"]}),
        **changes,
    )


# -- opening --------------------------------------------------------------------------------


@sqlite_only
def test_open_uses_the_soul_home_with_wal_and_foreign_keys(store: SessionStore) -> None:
    assert store.home == soul_home()
    assert (soul_home() / "soul.db").exists()
    conn = store.connection
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


def test_open_an_explicit_home(tmp_path: Path) -> None:
    with SessionStore.open(tmp_path / "elsewhere") as other:
        other.create_session("claudius", "ann")
    assert (tmp_path / "elsewhere" / "soul.db").exists()


def test_errors_are_soul_errors() -> None:
    assert issubclass(StoreError, SoulError)
    assert issubclass(SessionNotFound, StoreError)
    assert issubclass(StaleTurn, StoreError)


# -- sessions -------------------------------------------------------------------------------


def test_create_and_get_a_session(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann", blueprint="/b/soul.yaml", initial_state={"a": 1})
    assert (info.soul, info.user, info.turns, info.blueprint) == (
        "claudius",
        "ann",
        0,
        "/b/soul.yaml",
    )
    assert store.session(info.id) == info
    assert store.snapshot(info.id).state == {"a": 1}


def test_session_ids_given_and_refused(store: SessionStore) -> None:
    assert store.create_session("s", "u", session_id="my-session_1").id == "my-session_1"
    with pytest.raises(StoreError, match="already exists"):
        store.create_session("s", "u", session_id="my-session_1")
    for bad in ("../escape", "a/b", "", "x" * 65, "spa ce"):
        with pytest.raises(StoreError, match="invalid session id"):
            store.create_session("s", "u", session_id=bad or "-")


def test_unknown_session(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound, match="no session 'nope'"):
        store.session("nope")
    for call in (store.snapshot, store.messages, store.export_session, store.delete_session):
        with pytest.raises(SessionNotFound):
            call("nope")
    with pytest.raises(SessionNotFound):
        store.commit(turn_commit("nope", 0))


def test_find_session_by_prefix_like_git(store: SessionStore) -> None:
    store.create_session("s", "u", session_id="abc123")
    store.create_session("s", "u", session_id="abd456")
    store.create_session("s", "u", session_id="ab")
    assert store.find_session("abc").id == "abc123"
    assert store.find_session("ab").id == "ab"  # an exact id wins over longer ones
    with pytest.raises(SessionNotFound) as ambiguous:
        store.find_session("a")
    assert "ambiguous" in str(ambiguous.value)
    assert "abc123" in str(ambiguous.value) and "abd456" in str(ambiguous.value)
    with pytest.raises(SessionNotFound, match="no session starts with 'zz'"):
        store.find_session("zz")
    with pytest.raises(SessionNotFound):
        store.find_session("")
    with pytest.raises(SessionNotFound):
        store.find_session("a*")  # GLOB characters are not ids


def test_sessions_newest_first_and_by_soul(store: SessionStore) -> None:
    ids = [store.create_session(s, "u").id for s in ("claudius", "samantha", "claudius")]
    assert [s.id for s in store.sessions()] == ids[::-1]
    assert [s.id for s in store.sessions("claudius")] == [ids[2], ids[0]]
    assert store.sessions("nobody") == []


def test_delete_session_keeps_user_models(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    store.commit(
        turn_commit(
            info.id,
            0,
            user_model=UserModelChange("# Ann", "first"),
            memory=(MemoryEntry("core", "note", "x"),),
            chetana={"b": 1},
        )
    )
    assert session_logs_dir(info.id).exists()
    store.delete_session(info.id)
    with pytest.raises(SessionNotFound):
        store.session(info.id)
    assert not session_logs_dir(info.id).exists()
    conn = store.connection
    for table in ("messages", "state", "working_memory", "traces", "chetana", "commits"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    assert store.user_model("claudius", "ann").text == "# Ann"  # type: ignore[union-attr]
    with pytest.raises(SessionNotFound):
        store.delete_session(info.id)


# -- commits --------------------------------------------------------------------------------


def test_commit_advances_the_turn_and_stores_everything(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    before = time.time()
    assert store.commit(turn_commit(info.id, 0, 0, chetana={"bhava": [0.1]})) == 1
    assert store.commit(turn_commit(info.id, 1, 1)) == 2
    assert store.session(info.id).turns == 2
    assert store.session(info.id).updated >= before
    rows = store.messages(info.id)
    assert [(t, m.tag) for t, m, _ in rows][:4] == [
        (1, "user"),
        (1, "internal_monologue"),
        (1, "external_dialogue"),
        (1, "user_model_check"),
    ]
    assert {t for t, _, _ in rows} == {1, 2}
    assert all(at >= before for _, _, at in rows)
    assert [m.content for _, m, _ in store.messages(info.id, layer="external")] == [
        "hello 0",
        "reply 0",
        "hello 1",
        "reply 1",
    ]
    assert rows[1][1] == MessageRecord(
        "internal", "internal_monologue", "thinking 0", "think", "pondered"
    )
    assert store.trace(info.id, 2) == {"turn": 1, "steps": ["think", "reply"]}
    snap = store.snapshot(info.id)
    assert snap.state == {"currentTopic": "topic 1"}
    assert snap.chetana == {"bhava": [0.1]}


def test_snapshot_reads_the_chetana_state_another_writer_stored(store: SessionStore) -> None:
    # the store keeps the Chetana state it last wrote (so a snapshot need not decode it again):
    # a state written since by another store, or by hand, is what the next snapshot returns
    info = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0, 0, chetana={"bhava": [0.1], "turn": 1}))
    assert store.snapshot(info.id).chetana == {"bhava": [0.1], "turn": 1}
    with SessionStore.open(store.home, url=store.url) as other:
        other.commit(turn_commit(info.id, 1, 1, chetana={"bhava": [0.2], "turn": 2}))
    assert store.snapshot(info.id).chetana == {"bhava": [0.2], "turn": 2}
    store.commit(turn_commit(info.id, 2, 2, chetana={"bhava": [0.3], "turn": 3}))
    with SessionStore.open(store.home, url=store.url) as other:
        other._write(lambda conn: conn.execute(
            "UPDATE chetana SET json = ? WHERE session_id = ?", ('{"bhava":[0.4],"turn":3}', info.id)))
    assert store.snapshot(info.id).chetana == {"bhava": [0.4], "turn": 3}


def test_snapshot_chetana_state_is_what_its_stored_json_says(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    state = {"affect": {"valence": 0.25000000000000006, "recent": [True, False]}, "goals": [], "turn": 4}
    store.commit(turn_commit(info.id, 0, 0, chetana=state))
    stored = store.connection.execute("SELECT json FROM chetana WHERE session_id = ?", (info.id,)).fetchone()[0]
    assert store.snapshot(info.id).chetana == json.loads(stored) == state
    store.commit(turn_commit(info.id, 1, 1))  # no Chetana state: the stored one stays
    assert store.snapshot(info.id).chetana == state


def fresh_snapshot(store: SessionStore, session_id: str, **kw: Any) -> Any:
    """The snapshot another store reads (nothing of the first store's kept)."""
    with SessionStore.open(store.home, url=store.url) as other:
        return other.snapshot(session_id, **kw)


def test_snapshots_after_this_stores_commits_read_what_a_fresh_store_reads(store: SessionStore) -> None:
    # a store keeps a session's working memory and recent messages decoded between snapshots,
    # extended by its own commits: each snapshot must be what a read from scratch gives
    info = store.create_session("claudius", "ann")
    metas: list[Any] = [{"k": [1, 2.5, None]}, None, {}, {"nested": {"a": "b"}}]
    for n in range(7):
        memory = tuple(
            MemoryEntry("default", "internalMonologue", f"entry {n}.{i}", "mused", metas[(n + i) % 4])
            for i in range(3)
        )
        store.commit(turn_commit(info.id, n, n, memory=memory))
        if n == 3:  # a background cycle between two turns (kept count, its own messages)
            store.commit(Commit(info.id, 0, kind="cycle", process="p", cycle=1,
                                messages=(MessageRecord("subconscious", "thought", "musing", meta=None),)))
        recent = 5 if n == 5 else 20  # (a snapshot asking for fewer messages reads them again)
        mine, theirs = store.snapshot(info.id, recent=recent), fresh_snapshot(store, info.id, recent=recent)
        assert (mine.memory, mine.recent) == (theirs.memory, theirs.recent)
    assert len(store.snapshot(info.id).memory) == 21


def test_a_snapshot_over_kept_rows_still_reads_what_changed_beside_them(store: SessionStore) -> None:
    # the session's rows are kept (nothing committed to it since), so the snapshot reads only
    # its head: a user model another session of the same user wrote, and a state written by
    # hand, are what it returns
    info = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0, 0, user_model=UserModelChange("# v1", "n")))
    first = store.snapshot(info.id)
    assert (first.user_model, first.user_model_version, first.state) == ("# v1", 1, {"currentTopic": "topic 0"})
    beside = store.create_session("claudius", "ann")
    with SessionStore.open(store.home, url=store.url) as other:
        other.commit(turn_commit(beside.id, 0, 0, user_model=UserModelChange("# v2", "n")))
        other._write(lambda conn: conn.execute(
            "UPDATE state SET json = ? WHERE session_id = ?", ('{"currentTopic":"by hand"}', info.id)))
    snap = store.snapshot(info.id)
    assert (snap.user_model, snap.user_model_version, snap.state) == ("# v2", 2, {"currentTopic": "by hand"})
    assert (snap.memory, snap.recent) == (first.memory, first.recent)
    with SessionStore.open(store.home, url=store.url) as other:
        other.delete_session(info.id)
    with pytest.raises(SessionNotFound):
        store.snapshot(info.id)


def test_snapshot_reads_the_rows_another_writer_committed_or_expired(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    entry = MemoryEntry("default", "userMessage", "first")
    store.commit(turn_commit(info.id, 0, 0, memory=(entry,)))
    assert store.snapshot(info.id).memory == (entry,)
    with SessionStore.open(store.home, url=store.url) as other:  # another process's turn
        other.commit(turn_commit(info.id, 1, 1, memory=(MemoryEntry("default", "userMessage", "second"),)))
    snap = store.snapshot(info.id)
    assert [m.content for m in snap.memory] == ["first", "second"]
    assert [m.content for m in snap.recent[-4:]] == ["hello 1", "thinking 1", "reply 1", "false"]
    assert snap.recent == fresh_snapshot(store, info.id).recent
    with SessionStore.open(store.home, url=store.url) as other:  # another process expires all
        assert other.snapshot(info.id, ttl_hours=0).memory == ()
    assert store.snapshot(info.id).memory == ()
    # and this store's own expiry
    store.commit(turn_commit(info.id, 2, 2, memory=(MemoryEntry("default", "userMessage", "third"),)))
    assert [m.content for m in store.snapshot(info.id).memory] == ["third"]
    time.sleep(0.01)
    assert store.snapshot(info.id, ttl_hours=0.001 / 3600).memory == ()
    assert store.snapshot(info.id).memory == () == fresh_snapshot(store, info.id).memory


def test_an_applied_commit_gives_the_session_as_a_read_lists_it_after(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    for turn in range(2):
        applied = store.apply(turn_commit(info.id, turn, turn))
        assert applied.session == store.session(info.id)
        assert applied.session.turns == turn + 1


def test_stale_base_turn_is_refused(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0))
    with pytest.raises(StaleTurn, match="at turn 1, not 0"):
        store.commit(turn_commit(info.id, 0))
    with pytest.raises(StaleTurn):
        store.commit(turn_commit(info.id, 5))
    assert store.session(info.id).turns == 1
    assert len(store.messages(info.id)) == 4


def test_subprocess_commits_keep_the_turn_but_check_it(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0))
    sub = Commit(
        info.id,
        1,
        messages=(MessageRecord("internal", "summary", "s", "sum"),),
        memory=(MemoryEntry("summary", "summary", "s"),),
        kind="subprocess",
        trace={"sub": True},
    )
    assert store.commit(sub) == 1
    assert store.session(info.id).turns == 1
    assert store.messages(info.id)[-1][0] == 1
    assert store.trace(info.id, 1) == {"turn": 0, "steps": ["think", "reply"]}  # the turn's own
    assert [t["kind"] for t in store.traces(info.id)] == ["message", "subprocess"]
    with pytest.raises(StaleTurn):
        store.commit(Commit(info.id, 0, kind="subprocess"))
    assert store.commit(turn_commit(info.id, 1)) == 2
    with pytest.raises(StaleTurn):  # a subprocess of turn 1 after turn 2 began: dropped
        store.commit(sub)


def test_spontaneous_and_unknown_kinds(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    assert store.commit(Commit(info.id, 0, kind="spontaneous")) == 1
    with pytest.raises(StoreError, match="unknown commit kind"):
        store.commit(Commit(info.id, 1, kind="bogus"))  # type: ignore[arg-type]


def test_state_none_keeps_the_state(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann", initial_state={"k": 1})
    store.commit(Commit(info.id, 0))
    assert store.snapshot(info.id).state == {"k": 1}


def test_trace_missing_turn(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    with pytest.raises(StoreError, match="no trace for turn 3"):
        store.trace(info.id, 3)


# -- snapshots ------------------------------------------------------------------------------


def test_fresh_snapshot(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    snap = store.snapshot(info.id)
    assert snap.session == info
    assert (snap.state, snap.user_model, snap.user_model_version) == ({}, "", 0)
    assert (snap.memory, snap.recent, snap.chetana) == ((), (), None)
    assert snap.last_user_model_check is None


def test_recent_window_oldest_first(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    for n in range(3):
        store.commit(turn_commit(info.id, n, n))
    recent = store.snapshot(info.id, recent=5).recent
    assert [m.content for m in recent] == ["false", "hello 2", "thinking 2", "reply 2", "false"]
    assert recent[-1].tag == "user_model_check"
    assert store.snapshot(info.id, recent=0).recent == ()
    assert len(store.snapshot(info.id).recent) == 12


def test_samantha_dreams_gate_reads_the_latest_check(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0, 0))  # result False
    assert store.snapshot(info.id).last_user_model_check is False
    store.commit(turn_commit(info.id, 1, 1))  # result True
    assert store.snapshot(info.id).last_user_model_check is True
    # A turn without a check leaves the last one standing.
    store.commit(Commit(info.id, 2, messages=(MessageRecord("external", "user", "x"),)))
    assert store.snapshot(info.id).last_user_model_check is True
    # No boolean in meta: the text decides.
    check = MessageRecord("internal", "user_model_check", " No ", "check")
    store.commit(Commit(info.id, 3, messages=(check,)))
    assert store.snapshot(info.id).last_user_model_check is False



def test_the_latest_check_follows_this_stores_commits_and_another_writers(store: SessionStore) -> None:
    # the store keeps a session's last check with its messages, extended by its own commits
    # (several checks in one commit: the last; a meta that is not a plain dict; none): each
    # snapshot must say what a read from scratch says
    info = store.create_session("claudius", "ann")
    assert store.snapshot(info.id).last_user_model_check is None is fresh_snapshot(store, info.id).last_user_model_check

    def check(content: str, meta: Any = None) -> MessageRecord:
        return MessageRecord("internal", "user_model_check", content, "check", meta=meta)

    class Meta(dict):  # type: ignore[type-arg]  # a mapping of another type, stored as its dict
        pass

    commits = [
        (check("false", {"result": True}), check("true", {"result": False})),
        (MessageRecord("external", "user", "no check"),),
        (check(" Yes "),),
        (check("no", Meta(result=True)),),
        (check("true", {"result": "maybe"}),),
    ]
    for n, messages in enumerate(commits):
        store.commit(Commit(info.id, n, messages=messages))
        assert store.snapshot(info.id).last_user_model_check == fresh_snapshot(store, info.id).last_user_model_check
    assert store.snapshot(info.id).last_user_model_check is True
    with SessionStore.open(store.home, url=store.url) as other:  # another process's turn
        other.commit(Commit(info.id, len(commits), messages=(check("false", {"result": False}),)))
    assert store.snapshot(info.id).last_user_model_check is False

def test_working_memory_in_order_with_lazy_ttl(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    old = (MemoryEntry("default", "userMessage", "old", None, {"n": 1}),)
    store.commit(Commit(info.id, 0, memory=old))
    store.connection.execute("UPDATE working_memory SET time = time - 100 * 3600")
    new = (MemoryEntry("core", "internalMonologue", "new", "thought"),)
    store.commit(Commit(info.id, 1, memory=new))
    assert store.snapshot(info.id).memory == old + new
    assert store.snapshot(info.id, ttl_hours=200).memory == old + new
    assert store.snapshot(info.id, ttl_hours=72).memory == new
    # ... and the expired entry is gone for good.
    assert store.snapshot(info.id).memory == new


# -- user models ----------------------------------------------------------------------------


def test_user_model_versions_history_and_revert(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    assert store.user_model("claudius", "ann") is None
    assert store.user_model_history("claudius", "ann") == []
    store.commit(turn_commit(info.id, 0, user_model=UserModelChange("# v1", "met Ann")))
    store.commit(turn_commit(info.id, 1))
    store.commit(turn_commit(info.id, 2, user_model=UserModelChange("# v2", "likes jazz")))
    latest = store.user_model("claudius", "ann")
    assert latest is not None
    assert (latest.version, latest.text, latest.note, latest.session_id, latest.turn) == (
        2,
        "# v2",
        "likes jazz",
        info.id,
        3,
    )
    snap = store.snapshot(info.id)
    assert (snap.user_model, snap.user_model_version) == ("# v2", 2)
    reverted = store.revert_user_model("claudius", "ann", 1)
    assert (reverted.version, reverted.text, reverted.note) == (3, "# v1", "reverted to version 1")
    assert [v.version for v in store.user_model_history("claudius", "ann")] == [1, 2, 3]
    assert store.user_model_history("claudius", "ann")[-1] == reverted
    assert store.revert_user_model("claudius", "ann", 2, "undo").note == "undo"
    with pytest.raises(StoreError, match="no version 9"):
        store.revert_user_model("claudius", "ann", 9)


def test_user_models_are_per_soul_and_user_across_sessions(store: SessionStore) -> None:
    first = store.create_session("claudius", "ann")
    store.commit(Commit(first.id, 0, user_model=UserModelChange("# Ann", "n")))
    second = store.create_session("claudius", "ann")
    assert store.snapshot(second.id).user_model == "# Ann"
    store.commit(Commit(second.id, 0, user_model=UserModelChange("# Ann 2", "n")))
    assert store.snapshot(first.id).user_model_version == 2
    assert store.snapshot(store.create_session("claudius", "bob").id).user_model == ""
    assert store.snapshot(store.create_session("samantha", "ann").id).user_model == ""


# -- export and resume ----------------------------------------------------------------------


def test_export_is_json_safe_and_complete(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann", initial_state={"k": 0})
    store.commit(
        turn_commit(
            info.id,
            0,
            user_model=UserModelChange("# Ann", "n"),
            memory=(MemoryEntry("core", "note", "m", meta={"x": 1}),),
        )
    )
    data = json.loads(json.dumps(store.export_session(info.id)))
    assert data["session"]["id"] == info.id and data["session"]["status"] == "active"
    assert data["session"]["turns"] == 1
    assert data["state"] == {"currentTopic": "topic 0"}
    assert data["user_model"]["text"] == "# Ann" and len(data["user_model_history"]) == 1
    assert [m["tag"] for m in data["messages"]][:2] == ["user", "internal_monologue"]
    assert data["messages"][3]["meta"] == {"result": False}
    assert data["memory"][0]["content"] == "m" and data["memory"][0]["meta"] == {"x": 1}
    assert data["traces"][0]["trace"] == {"turn": 0, "steps": ["think", "reply"]}


def test_resume_after_reopening() -> None:
    with SessionStore.open() as first:
        info = first.create_session("claudius", "ann")
        first.commit(turn_commit(info.id, 0, memory=(MemoryEntry("core", "n", "m"),)))
        before = first.snapshot(info.id)
    with SessionStore.open() as second:
        resumed = second.find_session(info.id[:8])
        assert second.snapshot(resumed.id) == before
        assert second.commit(turn_commit(resumed.id, before.session.turns)) == 2


# -- all or nothing -------------------------------------------------------------------------


class FailingConnection:
    """A connection proxy that raises when a statement starting with `prefix` is executed."""

    def __init__(self, conn: Any, prefix: str, error: BaseException) -> None:
        self._conn, self._prefix, self._error = conn, prefix, error

    def _check(self, sql: str) -> None:
        if sql.lstrip().startswith(self._prefix):
            raise self._error

    def execute(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self._conn.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self._conn.executemany(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


FAILURE_POINTS = [
    "SELECT turns",
    "SELECT max(version)",
    "INSERT INTO commits",
    "INSERT INTO messages",
    "INSERT INTO state",
    "INSERT INTO user_models",
    "INSERT INTO working_memory",
    "INSERT INTO chetana",
    "INSERT INTO traces",
    "UPDATE sessions SET turns",
    "SELECT coalesce(max(id), 0) FROM commits",
    "COMMIT",
]
# read in the first statement on SQLite, whose write transaction holds the whole database
SEPARATE_ON_POSTGRESQL = {"SELECT max(version)", "SELECT coalesce(max(id), 0) FROM commits"}


def everything(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    """All there is to see of a session: snapshot, export, raw rows, log bytes."""
    folder = session_logs_dir(session_id)
    files = {p.name: p.read_bytes() for p in sorted(folder.glob("*"))} if folder.exists() else {}
    conn = store.connection
    counts = {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("commits", "messages", "user_models", "working_memory", "traces", "chetana")
    }
    return store.snapshot(session_id), store.export_session(session_id), counts, files


@pytest.mark.parametrize("point", FAILURE_POINTS)
@pytest.mark.parametrize("error", [RuntimeError("injected"), KeyboardInterrupt()])
def test_a_failure_anywhere_in_commit_leaves_the_session_as_it_was(
    store: SessionStore, point: str, error: BaseException
) -> None:
    if point in SEPARATE_ON_POSTGRESQL and store.backend == "sqlite":
        pytest.skip("no statement of its own on SQLite")
    info = store.create_session("claudius", "ann", initial_state={"k": 0})
    store.commit(turn_commit(info.id, 0, 0, user_model=UserModelChange("# v1", "n")))
    before = everything(store, info.id)
    real = store._conn
    store._conn = FailingConnection(real, point, error)  # type: ignore[assignment]
    big = turn_commit(
        info.id,
        1,
        1,
        user_model=UserModelChange("# v2", "changed"),
        memory=(MemoryEntry("core", "n", "m"),),
        chetana={"c": 2},
    )
    with pytest.raises(type(error)):
        store.commit(big)
    store._conn = real  # type: ignore[assignment]
    assert not real.in_transaction
    assert everything(store, info.id) == before
    # ... and the same commit then goes through.
    assert store.commit(big) == 2


def test_unserialisable_data_fails_before_any_write(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    before = everything(store, info.id)
    with pytest.raises(TypeError):
        store.commit(Commit(info.id, 0, state={"x": object()}))
    with pytest.raises(TypeError):
        store.commit(
            Commit(info.id, 0, messages=(MessageRecord("internal", "t", "c", meta={"x": {1, 2}}),))
        )
    assert everything(store, info.id) == before


# -- the JSONL mirror -----------------------------------------------------------------------


def test_logs_per_layer_one_object_per_message(store: SessionStore) -> None:
    info = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0, 0))
    folder = session_logs_dir(info.id)
    external = logs.read(folder, "external_dialog")
    assert [(x["turn"], x["tag"], x["content"]) for x in external] == [
        (1, "user", "hello 0"),
        (1, "external_dialogue", "reply 0"),
    ]
    assert set(external[1]) == {"commit", "turn", "time", "tag", "step", "verb", "content", "meta"}
    assert external[1]["verb"] == "said" and external[1]["step"] == "reply"
    internal = logs.read(folder, "internal_dialog")
    assert [x["tag"] for x in internal] == ["internal_monologue", "user_model_check"]
    assert internal[1]["meta"] == {"result": False}
    events = logs.read(folder, "events")
    assert events[-1]["tag"] == "commit" and events[-1]["meta"]["kind"] == "message"
    assert (
        store.connection.execute(
            "SELECT logged_commit FROM sessions WHERE id = ?", (info.id,)
        ).fetchone()[0]
        == events[-1]["commit"]
    )


def test_checkpoints_run_on_a_background_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import soul.store.database

    monkeypatch.setattr(soul.store.database, "CHECKPOINT_EVERY", 1)  # every commit wakes the thread
    store = SessionStore.open()
    info = store.create_session("claudius", "ann")
    for base in range(20):
        store.commit(turn_commit(info.id, base, base))
    thread = store._checkpointer._thread
    assert thread is not None and thread.is_alive()
    store.close()
    assert not thread.is_alive()
    with SessionStore.open() as reopened:
        assert reopened.session(info.id).turns == 20
        assert reopened.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_commit_of_many_messages_stores_them_all_in_order(store: SessionStore) -> None:
    # Rows go in many to a statement (issue 26), 64 at most: 150 messages and 70 memory
    # entries take several statements, and come back every one, in the order committed.
    info = store.create_session("claudius", "ann")
    messages = tuple(
        MessageRecord("internal" if i % 3 else "external", "t", f"m{i}", meta={"i": i} if i % 2 else None)
        for i in range(150)
    )
    memory = tuple(MemoryEntry("thread", "note", f"e{i}") for i in range(70))
    store.commit(Commit(info.id, 0, messages=messages, memory=memory, trace={}))
    rows = store.connection.execute(
        "SELECT content, meta FROM messages WHERE session_id = ? ORDER BY id", (info.id,)
    ).fetchall()
    assert [r[0] for r in rows] == [f"m{i}" for i in range(150)]
    assert [json.loads(r[1]) for r in rows] == [{"i": i} if i % 2 else {} for i in range(150)]
    entries = store.connection.execute(
        "SELECT content FROM working_memory WHERE session_id = ? ORDER BY id", (info.id,)
    ).fetchall()
    assert [r[0] for r in entries] == [f"e{i}" for i in range(70)]
    lines = [x["content"] for name in ("external_dialog", "internal_dialog") for x in logs.read(session_logs_dir(info.id), name)]
    assert sorted(lines, key=lambda c: int(c[1:])) == [f"m{i}" for i in range(150)]


def test_rows_get_the_values_they_share_as_if_each_were_inserted_alone(store: SessionStore) -> None:
    # the session, commit, turn, time and cycle are bound once for all of a commit's rows:
    # every row still gets them, with their types (a NULL cycle too), beside its own values
    info = store.create_session("claudius", "ann")
    for n, cycle in enumerate((None, 7)):
        messages = (MessageRecord("external", "user", f"hi {n}"), MessageRecord("internal", "t", "x\x00y", "s", "v", {"k": n}))
        memory = (MemoryEntry("thread", "note", f"e{n}", None, {"a": [1.5]}), MemoryEntry("r", "t", "", "mused"))
        store.commit(Commit(info.id, n, messages=messages, memory=memory, trace={}, process="p" if cycle else None, cycle=cycle))
    conn = store.connection
    commits = [tuple(r) for r in conn.execute("SELECT id, turn, time FROM commits WHERE session_id = ? ORDER BY id", (info.id,))]
    rows = [tuple(r) for r in conn.execute(
        "SELECT session_id, commit_id, turn, time, cycle, layer, tag, step, verb, content, meta FROM messages"
        " WHERE session_id = ? ORDER BY id", (info.id,))]
    assert rows == [
        (info.id, cid, turn, at, cycle, *m)
        for (cid, turn, at), cycle in zip(commits, (None, 7), strict=True)
        for m in (("external", "user", None, None, f"hi {turn - 1}", "{}"),
                  ("internal", "t", "s", "v", "x\x00y", f"{{\"k\":{turn - 1}}}"))
    ]
    assert all(type(r[3]) is float and type(r[2]) is int for r in rows)
    entries = [tuple(r) for r in conn.execute(
        "SELECT session_id, commit_id, turn, time, region, entry_type, content, verb, meta FROM working_memory"
        " WHERE session_id = ? ORDER BY id", (info.id,))]
    assert entries == [
        (info.id, cid, turn, at, *e)
        for cid, turn, at in commits
        for e in (("thread", "note", f"e{turn - 1}", None, '{"a":[1.5]}'), ("r", "t", "", "mused", "{}"))
    ]


@sqlite_only
def test_the_checkpoint_thread_is_woken_every_nth_commit(store: SessionStore) -> None:
    import soul.store.database

    checkpointer = store._checkpointer
    assert checkpointer is not None
    woken: list[int] = []

    class Wake:  # counts the wakes; the thread it starts finds nothing to wait for and ends
        def set(self) -> None:
            woken.append(1)

        def wait(self) -> bool:
            return False

    checkpointer._wake = Wake()  # type: ignore[assignment]
    info = store.create_session("claudius", "ann")
    every = soul.store.database.CHECKPOINT_EVERY
    for base in range(3 * every + 1):
        store.commit(turn_commit(info.id, base, base))
    assert len(woken) == 3


@sqlite_only
def test_the_store_opens_none_of_sqlites_files_itself(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # closing any descriptor of a file releases every POSIX lock the process holds on it,
    # SQLite's own among them: a descriptor of the -shm file opened and closed beside SQLite's
    # let another process rebuild the wal-index under a live connection (SIGBUS, a corrupt
    # index). Commits, snapshots and the checkpoints around them open no database file.
    import os

    import soul.store.database

    monkeypatch.setattr(soul.store.database, "CHECKPOINT_EVERY", 1)
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: object, *args: object, **kwargs: object) -> int:
        opened.append(os.fspath(path))  # type: ignore[arg-type]
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", recording_open)
    info = store.create_session("claudius", "ann")
    for base in range(20):
        store.snapshot(info.id)
        store.commit(turn_commit(info.id, base, base, memory=(MemoryEntry("default", "userMessage", f"m{base}"),)))
    store.repair_logs()
    assert opened  # (the logs' files are opened: the recording works)
    database = str(soul_home() / "soul.db")
    assert [path for path in opened if path.startswith(database)] == []


@sqlite_only
def test_a_turn_is_one_write_transaction_and_a_snapshot_over_kept_rows_one_statement(store: SessionStore) -> None:
    # what a turn costs the store in statements (each a round through the driver and SQLite):
    # the commit reads what it checks in its first statement, writes each table once, and the
    # logs' cursor moves after the lines are appended; the next snapshot, its rows and head
    # kept (nothing written since the commit: soul.store.heads), asks only whether another
    # connection wrote
    info = store.create_session("claudius", "ann", initial_state={"k": 0})
    store.commit(turn_commit(info.id, 0, 0))
    store.snapshot(info.id)
    ran: list[str] = []
    store.connection.set_trace_callback(ran.append)
    try:
        store.commit(turn_commit(
            info.id, 1, 1, user_model=UserModelChange("# v1", "n"), chetana={"c": 1},
            memory=(MemoryEntry("default", "userMessage", "hi"),),
        ))
        committed = [" ".join(sql.split()[:3]) for sql in ran]
        ran.clear()
        store.snapshot(info.id)
    finally:
        store.connection.set_trace_callback(None)
    assert committed == [
        "BEGIN IMMEDIATE", "SELECT turns, soul,", "INSERT INTO commits", "INSERT INTO messages",
        "INSERT INTO state", "INSERT INTO user_models", "INSERT INTO working_memory",
        "INSERT INTO chetana", "INSERT INTO traces", "UPDATE sessions SET", "COMMIT",
        "UPDATE sessions SET",
    ]
    assert ran == ["PRAGMA data_version"]
    # another write of the store (here a user model reverted) and the head is read again
    store.revert_user_model("claudius", "ann", 1)
    store.connection.set_trace_callback(ran.append)
    ran.clear()
    try:
        store.snapshot(info.id)
    finally:
        store.connection.set_trace_callback(None)
    assert [" ".join(sql.split()[:3]) for sql in ran] == ["PRAGMA data_version", "SELECT id, soul,"]


def same_snapshot(mine: Any, theirs: Any) -> bool:
    """Two snapshots of a session alike in all a turn reads of them."""
    return all(getattr(mine, f) == getattr(theirs, f) for f in (
        "session", "state", "user_model", "user_model_version", "memory", "recent", "chetana",
        "last_user_model_check"))


@sqlite_only
def test_a_kept_head_is_what_a_fresh_read_gives_after_every_kind_of_write(store: SessionStore) -> None:
    # a snapshot after this store's own commit takes the head the commit worked out (no read):
    # after commits writing each part or none, a write of another session, a user model of the
    # same user written beside it and another connection's commit, it is what a store that
    # kept nothing reads
    info = store.create_session("claudius", "ann", initial_state={"k": 0})
    beside = store.create_session("claudius", "ann")
    store.commit(turn_commit(info.id, 0, 0))
    store.snapshot(info.id)  # (read: kept from here)
    changes: list[dict[str, Any]] = [
        {"user_model": UserModelChange("# v1", "n"), "chetana": {"c": 1}},
        {"state": None},  # nothing but messages
        {"memory": (MemoryEntry("default", "userMessage", "hi"),), "state": {"k": 2}},
        {"chetana": {"c": 2, "f": 0.30000000000000004}},
    ]
    turn = 1
    for n, change in enumerate(changes * 2):
        store.commit(turn_commit(info.id, turn, turn, **change))
        turn += 1
        assert same_snapshot(store.snapshot(info.id), fresh_snapshot(store, info.id))
        if n == 1:  # a write of this store for another session of the same user
            store.commit(turn_commit(beside.id, 0, 0, user_model=UserModelChange("# beside", "n")))
        if n == 3:  # another connection commits to this very session
            with SessionStore.open(store.home) as other:
                other.commit(turn_commit(info.id, turn, turn, user_model=UserModelChange("# other", "n")))
            turn += 1
        if n == 5:  # ... and to the other session, a user model of the same user again
            with SessionStore.open(store.home) as other:
                other.commit(turn_commit(beside.id, 1, 1, user_model=UserModelChange("# other 2", "n")))
        assert same_snapshot(store.snapshot(info.id), fresh_snapshot(store, info.id))
    assert store.snapshot(info.id).user_model_version == 5  # two of its own, three beside
