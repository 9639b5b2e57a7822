"""The SQLite connection of the data home: configuration, retries on busy, checkpoints.

Several processes may use one home at once: WAL lets readers run beside the writer, the busy
timeout queues writers, and a busy error that still escapes is retried with backoff. WAL
checkpoints run on a thread of their own so no commit waits on their fsync.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from soul.errors import StoreError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
RETRY_SECONDS = 60.0  # overall patience for a write that keeps meeting SQLITE_BUSY
CHECKPOINT_BYTES = 4 << 20  # SQLite's own checkpoint (the backstop) at four times this; its default: 4 MB
CHECKPOINT_EVERY = 32  # commits between two checkpoints (a typical turn adds ~100 KB of WAL)


def connect(path: Path) -> sqlite3.Connection:
    """A configured connection: autocommit (every transaction explicit), WAL, busy timeout."""
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    try:
        retry(lambda: configure(conn))
    except BaseException:
        conn.close()
        raise
    return conn


def damaged(error: sqlite3.Error, path: Path) -> StoreError | None:
    """The StoreError to raise for an error that means the database file itself is unusable
    (garbage bytes, a truncated file, a folder in its place), or None for any other error."""
    code = getattr(error, "sqlite_errorcode", None)
    aside = f"move it aside (mv {path} {path}.damaged) and soul starts an empty one"
    if code == sqlite3.SQLITE_CANTOPEN:
        if path.is_dir():
            return StoreError(f"the session database {path} is a folder, not a file: {aside}")
        return StoreError(
            f"cannot open the session database {path} ({error}): check that its folder is "
            f"writable, or {aside}"
        )
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreError(
            f"the session database {path} is damaged ({error}): {aside}; the sessions' text "
            f"is also in the JSONL logs beside it ({path.parent / 'logs'})"
        )
    return None


def is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)  # pragma: no cover


def dicts(conn: sqlite3.Connection, query: str, *args: Any) -> list[dict[str, Any]]:
    """Rows as dicts named by their columns, with the JSON of `meta` and `trace` decoded."""
    cursor = conn.execute(query, args)
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor]
    for key in {"meta", "trace"}.intersection(names):
        for row in rows:
            row[key] = json.loads(row[key])
    return rows


class Checkpointer:
    """WAL checkpoints on a thread with its own connection, so no commit waits on their fsync.

    A checkpoint copies the WAL back into the database and syncs it: ~1-100 ms on a real disk,
    which SQLite's automatic checkpoint would charge to every ~100th commit. PASSIVE never
    blocks writers or readers, here or in another process.

    The thread is woken every `CHECKPOINT_EVERY`th commit, by count. It was woken by what the
    wal-index header said was not yet copied back, read from the -shm file with a descriptor
    of its own — and closing that descriptor released every POSIX lock this process held on
    the file (fcntl locks belong to the process and the file, not the descriptor), SQLite's
    among them: its "dead-man switch" lock tells another process that the wal-index is in use,
    so a process opening the database next took it for unused and rebuilt it under a live
    connection (writers died of SIGBUS on the truncated mapping, or an index lost entries:
    https://sqlite.org/howtocorrupt.html, 2.2). The store opens none of SQLite's files itself.
    """

    def __init__(self, db: Path) -> None:
        self._db = db
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._pokes = 0

    def poke(self) -> None:
        """After a commit: wake the thread every `CHECKPOINT_EVERY`th (~3 MB of WAL at a
        typical turn's ~100 KB; a checkpoint with less to copy costs less; SQLite's own
        checkpoint, at four times the threshold, stays the backstop)."""
        self._pokes += 1
        if self._pokes % CHECKPOINT_EVERY or self._closed:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="soul-checkpoint", daemon=True)
            self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        conn = sqlite3.connect(self._db, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            while self._wake.wait() and not self._closed:
                self._wake.clear()
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise StoreError(f"could not switch the session database to WAL (got {mode})")
    # NORMAL in WAL: a commit is atomic and consistent; only the last ones may be lost on power
    # failure (never corrupted), which is what keeps a commit well under a millisecond.
    conn.execute("PRAGMA synchronous = NORMAL")
    # Checkpoints are the background thread's job; this is only the backstop if it falls behind.
    conn.execute(f"PRAGMA wal_autocheckpoint = {4 * CHECKPOINT_BYTES // 4096}")
    conn.execute(f"PRAGMA journal_size_limit = {4 * CHECKPOINT_BYTES}")
    conn.execute("PRAGMA foreign_keys = ON")


def retry(fn: Callable[[], T]) -> T:
    """Call `fn`, retrying with jittered exponential backoff while SQLite reports busy."""
    deadline = time.monotonic() + RETRY_SECONDS
    delay = 0.002
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as error:
            if not is_busy(error) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.25)
