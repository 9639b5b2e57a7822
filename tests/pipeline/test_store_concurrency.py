"""Two processes on one data home: no corruption, no lost or doubled commit, no lock errors.
On both backends: the children inherit `$SOUL_STORE` (see store_backends.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from store_backends import backend, store_url  # noqa: F401 - fixtures

from soul.store import logs
from soul.store.home import session_logs_dir
from soul.store.migrations import MIGRATIONS
from soul.store.sessions import SessionStore

COMMITS = 50

pytestmark = pytest.mark.usefixtures("store_url")

# Each child waits for the go file so both really run at the same time, then prints JSON.
PRELUDE = """
import json, os, sys, time
from pathlib import Path
from soul.records import Commit, MessageRecord, UserModelChange
from soul.errors import StaleTurn
from soul.store import SessionStore
name, go = sys.argv[1], Path(sys.argv[2])
args = json.loads(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
store = SessionStore.open()  # after the go: opening races too

def turn(session_id, base, text, **extra):
    return Commit(session_id, base, messages=(
        MessageRecord("external", "user", text),
        MessageRecord("internal", "internal_monologue", "thinking about " + text, "t", "mused"),
        MessageRecord("external", "external_dialogue", "reply to " + text, "r", "said"),
    ), state={"last": text}, trace={"text": text, "pad": "x" * 2000}, **extra)
"""

OWN_SESSIONS = """
ids = []
for i in range(args["commits"]):
    if i % 10 == 0:  # new sessions keep appearing while the other process commits
        ids.append(store.create_session("claudius", name).id)
    sid = ids[-1]
    base = store.snapshot(sid).session.turns
    note = UserModelChange(f"# {name} {i}", "seen") if i % 7 == 0 else None
    store.commit(turn(sid, base, f"{name}-{i}", user_model=note))
print(json.dumps(ids))
"""

SHARED_SESSION = """
stale = 0
for i in range(args["commits"]):
    while True:  # the runtime's loop on a lost race: re-read and run the turn again
        base = store.snapshot(args["session"]).session.turns
        try:
            store.commit(turn(args["session"], base, f"{name}-{i}"))
            break
        except StaleTurn:
            stale += 1
print(json.dumps(stale))
"""

SAME_BASE = """
results = {}
for sid in args["sessions"]:
    try:
        store.commit(turn(sid, 0, name))
        results[sid] = "won"
    except StaleTurn:
        results[sid] = "stale"
print(json.dumps(results))
"""


def run_two(tmp_path: Path, body: str, args: dict[str, object]) -> list[object]:
    """Start two children on the same home, release them together, return their outputs."""
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", PRELUDE + body, name, str(go), json.dumps(args)],
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    time.sleep(0.5)  # both have started Python and wait at the line
    go.touch()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err  # no "database is locked", no exception at all
        assert "locked" not in err
        outputs.append(json.loads(out))
    return outputs


def check_integrity(store: SessionStore) -> None:
    conn = store.connection
    if store.backend == "sqlite":
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        return
    # PostgreSQL enforces the foreign keys itself; messages name their commit by value.
    orphans = conn.execute(
        "SELECT count(*) FROM messages m LEFT JOIN commits c ON c.id = m.commit_id"
        " WHERE c.id IS NULL"
    ).fetchone()[0]
    assert orphans == 0


def check_logs(store: SessionStore, session_id: str) -> None:
    lines, _ = logs.pending_lines(store.connection, session_id, 0)
    folder = session_logs_dir(session_id)
    for name in logs.LOG_FILES:
        expected = "".join(logs.encode(x.data) for x in lines if x.file == name)
        path = folder / f"{name}.jsonl"
        assert (path.read_text() if path.exists() else "") == expected, name


def test_two_processes_commit_to_their_own_sessions(tmp_path: Path) -> None:
    SessionStore.open().close()  # the schema exists before the race (racing it is tested too)
    ids_1, ids_2 = run_two(tmp_path, OWN_SESSIONS, {"commits": COMMITS})
    with SessionStore.open() as store:
        check_integrity(store)
        for name, ids in (("p1", ids_1), ("p2", ids_2)):
            assert isinstance(ids, list)
            assert sum(store.session(sid).turns for sid in ids) == COMMITS
            said = [m.content for sid in ids for _, m, _ in store.messages(sid, layer="external")]
            users = [c for c in said if not c.startswith("reply")]
            assert users == [f"{name}-{i}" for i in range(COMMITS)]  # each once, in order
            for sid in ids:
                check_logs(store, sid)
            history = store.user_model_history("claudius", name)
            assert [v.version for v in history] == list(range(1, len(range(0, COMMITS, 7)) + 1))
        assert store.connection.execute("SELECT count(*) FROM commits").fetchone()[0] == 2 * COMMITS


def test_two_processes_take_turns_on_one_session(tmp_path: Path) -> None:
    with SessionStore.open() as store:
        sid = store.create_session("claudius", "ann").id
    run_two(tmp_path, SHARED_SESSION, {"commits": COMMITS, "session": sid})
    with SessionStore.open() as store:
        check_integrity(store)
        assert store.session(sid).turns == 2 * COMMITS
        rows = store.messages(sid, layer="external")
        users = [m.content for _, m, _ in rows if m.tag == "user"]
        assert sorted(users) == sorted(f"{n}-{i}" for n in ("p1", "p2") for i in range(COMMITS))
        turns = [t for t, m, _ in rows if m.tag == "user"]
        assert turns == list(range(1, 2 * COMMITS + 1))  # one user message per turn, no gaps
        check_logs(store, sid)


def test_same_base_turn_from_two_processes_one_wins(tmp_path: Path) -> None:
    with SessionStore.open() as store:
        sessions = [store.create_session("claudius", "ann").id for _ in range(30)]
    first, second = run_two(tmp_path, SAME_BASE, {"sessions": sessions})
    assert isinstance(first, dict) and isinstance(second, dict)
    with SessionStore.open() as store:
        check_integrity(store)
        for sid in sessions:
            assert sorted([first[sid], second[sid]]) == ["stale", "won"]
            winner = "p1" if first[sid] == "won" else "p2"
            assert store.session(sid).turns == 1
            assert [m.content for _, m, _ in store.messages(sid) if m.tag == "user"] == [winner]
            check_logs(store, sid)


def test_two_processes_open_a_fresh_home_at_once(tmp_path: Path) -> None:
    # Nothing exists yet: both race to create the file, switch to WAL and migrate.
    outputs = run_two(tmp_path, "print(json.dumps(store.create_session('s', name).id))", {})
    with SessionStore.open() as store:
        check_integrity(store)
        assert {s.id for s in store.sessions()} == set(outputs)
        applied = store.connection.execute("SELECT count(*) FROM migrations").fetchone()[0]
        assert applied == len(MIGRATIONS)


OPENER = """
import sqlite3
from soul.store import home
db, n = str(home.db_path(home.data_home(None))), 0
end = time.time() + args["seconds"]
while time.time() < end:  # what `soul sessions` in another terminal does, over and over
    conn = sqlite3.connect(db, timeout=10)
    conn.execute("SELECT count(*) FROM commits").fetchone()
    conn.close()
    n += 1
print(json.dumps(n))
"""

BUSY_WRITER = """
import soul.store.database
soul.store.database.CHECKPOINT_EVERY = 1  # every commit wakes the checkpoint thread
sid = store.create_session("claudius", name).id
end, n = time.time() + args["seconds"], 0
while time.time() < end:
    store.commit(turn(sid, n, f"{name}-{n}"))
    n += 1
print(json.dumps(n))
"""


@pytest.mark.slow
def test_a_process_opening_the_database_while_others_commit_breaks_nothing(tmp_path: Path, backend: str) -> None:  # noqa: F811 - the fixture
    # A descriptor of the -shm file opened and closed beside SQLite's (the checkpoint's look at
    # the wal-index) released this process's locks on it: the next process to open the database
    # took the wal-index for unused and rebuilt it under the writers, which died of SIGBUS or
    # left an index short of entries. Two writers and a process opening the database over and
    # over for a few seconds: both writers finish, and the database is whole.
    if backend != "sqlite":
        pytest.skip("SQLite's wal-index")
    SessionStore.open().close()
    go = tmp_path / "go"
    children = [
        subprocess.Popen([sys.executable, "-c", PRELUDE + body, name, str(go), json.dumps({"seconds": 4})],
                         env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, body in (("w1", BUSY_WRITER), ("w2", BUSY_WRITER), ("opener", OPENER))
    ]
    time.sleep(0.5)
    go.touch()
    done = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, (child.returncode, err)  # SIGBUS: -7
        done.append(json.loads(out))
    assert all(n > 0 for n in done)
    with SessionStore.open() as store:
        check_integrity(store)
        assert store.connection.execute("SELECT count(*) FROM commits").fetchone()[0] == done[0] + done[1]
