"""The session store: SQLite (WAL) under the data home, or PostgreSQL when `SOUL_STORE` (or
`open(url=...)`) is a postgresql:// URL; the JSONL mirror beside it under the data home.

A turn's `Commit` is applied in one write transaction (SQLite: `BEGIN IMMEDIATE`; PostgreSQL:
the session row locked `FOR UPDATE`), compare-and-set on the session's turn count: all of it
or none of it, and never two writers' half-turns interleaved. Both backends run the same SQL
and migrations; their differences are in `soul.store.dialect` and `soul.store.postgres`.
The JSONL logs are written after the transaction commits and repaired from the database if a
process dies in between (see `soul.store.logs`).

Several processes may use one home at once (see `soul.store.database`). Reading a session back,
committing, user models, export, moving sessions between stores and background processes live in
`soul.store.reading`, `soul.store.commits`, `soul.store.user_models`, `soul.store.export`,
`soul.store.transfer` and `soul.store.minds`, a session through time and forking it in
`soul.store.timeline` and `soul.store.forks`,
mixed into `SessionStore`; reading a commit another
process announced (`soul.store.notify`), what `soul worker` polls (`soul.store.due`), its
heartbeats (`soul.store.workers`) and the memory partitions' leases (`soul.store.partitions`)
too.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from soul.errors import SessionNotFound, StaleTurn, StoreError
from soul.records import SessionInfo
from soul.store import home as soul_home
from soul.store import postgres as postgres_store
from soul.store.commits import Commits, dumps
from soul.store.connection import Connection
from soul.store.database import Checkpointer, connect, damaged, retry
from soul.store.descriptors import Descriptors
from soul.store.dialect import Dialect, dialect_of
from soul.store.due import Due
from soul.store.export import SESSION_COLUMNS, Export
from soul.store.forks import Forks
from soul.store.heads import Heads
from soul.store.migrations import migrate
from soul.store.minds import Minds
from soul.store.notify import Notices
from soul.store.partitions import Partitions
from soul.store.reading import Reading, SeenSessions, session_info
from soul.store.redaction import redact_data
from soul.store.shards import shard_of
from soul.store.timeline import Timeline
from soul.store.transfer import Transfer
from soul.store.user_models import UserModels
from soul.store.workers import Workers

__all__ = ["SessionNotFound", "SessionStore", "StaleTurn", "StoreError"]

T = TypeVar("T")
log = logging.getLogger(__name__)

class SessionStore(Reading, Commits, UserModels, Export, Transfer, Minds, Notices, Due, Workers, Partitions,
                   Timeline, Forks):
    """Sessions, messages, state, user models, working memory and traces of one data home."""

    def __init__(self, conn: Connection, home: Path) -> None:
        """Use `SessionStore.open()`; this wraps an already configured connection."""
        self._conn: Connection = conn
        self.home = home
        # One connection per store; the lock lets the runtime commit from a worker thread.
        self._lock = threading.RLock()
        self._log_folders: dict[str, Path] = {}  # each session's JSONL folder, by id (store/commits.py)
        self._descriptors = Descriptors()  # their lock and log files, kept open between commits
        # each session's Chetana state as this store last wrote it: (its JSON, the value)
        self._chetana_written: dict[str, tuple[str, Any]] = {}
        # each session's working memory and recent messages, decoded (store/reading.py: Seen)
        self._seen = SeenSessions()
        # each session's snapshot head while nothing changed it (SQLite only: store/heads.py),
        # and the count of this store's write transactions it is checked against
        self._heads: Heads | None = Heads() if isinstance(conn, sqlite3.Connection) else None
        self._writes = 0
        # WAL checkpoints are SQLite's; PostgreSQL runs its own.
        self._checkpointer = (
            Checkpointer(soul_home.db_path(home)) if isinstance(conn, sqlite3.Connection) else None
        )

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, home: Path | None = None, *, url: str | None = None) -> SessionStore:
        """Open (creating if needed) `home/soul.db`: WAL, busy timeout, foreign keys, migrated.

        With `url` (or, when it is None, `$SOUL_STORE`) a postgresql:// URL, the sessions live
        in that PostgreSQL database instead (migrated the same way); the JSONL logs stay under
        `home` either way. Logs left behind by a process that died after a commit are repaired
        here.
        """
        root = soul_home.data_home(home)
        if (chosen := postgres_store.store_url(url)) is not None:
            return cls._open_postgres(chosen, root)
        path = soul_home.db_path(root)
        try:
            conn = connect(path)
        except sqlite3.DatabaseError as error:
            if (report := damaged(error, path)) is None:
                raise
            raise report from error
        try:
            retry(lambda: migrate(conn))
            store = cls(conn, root)
            store.repair_logs()
        except sqlite3.DatabaseError as error:
            conn.close()
            if (report := damaged(error, path)) is None:
                raise
            raise report from error
        except BaseException:
            conn.close()
            raise
        return store

    @classmethod
    def _open_postgres(cls, url: str, root: Path) -> SessionStore:
        store = cls(postgres_store.connect(url), root)
        try:
            store._dialect.retry(lambda: migrate(store._conn))
            store.repair_logs()
        except BaseException:
            store.close()
            raise
        return store

    @property
    def backend(self) -> str:
        """Where the sessions live: "sqlite" or "postgresql"."""
        return self._dialect.name

    @property
    def url(self) -> str | None:
        """The PostgreSQL store's URL (None for the SQLite file)."""
        return getattr(self._conn, "url", None)

    @property
    def _dialect(self) -> Dialect:
        return dialect_of(self._conn)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._checkpointer is not None:
            self._checkpointer.close()
        self._descriptors.close()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> Connection:
        """The underlying connection (for inspection and tests; write through the methods)."""
        return self._conn

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        # One read transaction: WAL gives it a consistent view while writers carry on.
        with self._lock, self._damage_reported():
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def _damage_reported(self) -> _DamageReported:
        # Damage found after open (a page torn by a disk fault) is a StoreError saying what to
        # do, like damage found at open; any other SQLite error keeps its type. (PostgreSQL's
        # connection reports its own failures: soul.store.postgres.)
        return _DamageReported(self.home)

    def _write(self, body: Callable[[Connection], T]) -> T:
        """Run `body` in one write transaction (SQLite: BEGIN IMMEDIATE), retried whole while
        the backend says busy (SQLite) or to try again (PostgreSQL: deadlock, serialisation)."""

        def attempt() -> T:
            with self._lock:
                self._writes += 1  # (a kept snapshot head is read again after any write)
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = body(self._conn)
                    self._conn.execute("COMMIT")
                except BaseException:
                    # Also on KeyboardInterrupt: the turn leaves no trace.
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
                return result

        with self._damage_reported():
            return self._dialect.retry(attempt)

    # -- sessions --------------------------------------------------------------------------

    def create_session(
        self,
        soul: str,
        user: str,
        *,
        blueprint: str = "",
        initial_state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """A new session of `soul` with `user`, at turn 0, with `initial_state` if given."""
        sid = session_id or uuid.uuid4().hex
        if not soul_home.valid_session_id(sid):
            raise StoreError(
                f"invalid session id {sid!r}: use letters, digits, '_' and '-' (at most 64)"
            )
        now = time.time()
        state = dumps(redact_data(initial_state)) if initial_state is not None else None

        def body(conn: Connection) -> None:
            # ON CONFLICT: two processes creating one id at once get this error, not a crash.
            added = conn.execute(
                "INSERT INTO sessions (id, soul, user, blueprint, created, updated, shard)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (sid, soul, user, blueprint, now, now, shard_of(soul, user)),
            ).rowcount
            if not added:
                raise StoreError(f"session {sid} already exists")
            if state is not None:
                conn.execute("INSERT INTO state (session_id, json) VALUES (?, ?)", (sid, state))

        self._write(body)
        return SessionInfo(sid, soul, user, 0, now, now, blueprint)

    def session(self, session_id: str) -> SessionInfo:
        """The session with exactly this id; SessionNotFound if there is none."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return session_info(row)

    def find_session(self, prefix: str) -> SessionInfo:
        """The one session whose id starts with `prefix` (an exact id always wins), like git."""
        if not prefix or not soul_home.valid_session_id(prefix):
            raise SessionNotFound(f"no session {prefix!r}")
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ? OR id GLOB ? || '*'"
                " ORDER BY created DESC LIMIT 11",
                (prefix, prefix),
            ).fetchall()
        exact = [r for r in rows if r[0] == prefix]
        if exact or len(rows) == 1:
            return session_info((exact or rows)[0])
        if not rows:
            raise SessionNotFound(f"no session starts with {prefix!r}")
        listed = "\n".join(f"  {r[0]}  {r[1]} with {r[2]}" for r in rows[:10])
        more = "\n  ..." if len(rows) > 10 else ""
        raise SessionNotFound(
            f"session prefix {prefix!r} is ambiguous; candidates:\n{listed}{more}\n"
            "give more characters of the id"
        )

    def sessions(self, soul: str | None = None) -> list[SessionInfo]:
        """All sessions (of one soul if given), newest first."""
        query = f"SELECT {SESSION_COLUMNS} FROM sessions"
        args: tuple[Any, ...] = ()
        if soul is not None:
            query += " WHERE soul = ?"
            args = (soul,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY created DESC, rowid DESC", args)
            return [session_info(r) for r in rows]

    def delete_session(self, session_id: str) -> None:
        """Delete a session with everything of its own and its logs; user models are kept."""

        def body(conn: Connection) -> int:
            # Every per-session table cascades from sessions (foreign_keys is on).
            return conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount

        if not self._write(body):
            raise SessionNotFound(f"no session {session_id!r}")
        self._seen.drop(session_id)  # what the store kept of it, decoded
        if self._heads is not None:
            self._heads.drop(session_id)
        self._chetana_written.pop(session_id, None)
        if soul_home.valid_session_id(session_id):
            folder = soul_home.session_logs_dir(session_id, self.home)
            self._descriptors.forget(folder)
            shutil.rmtree(folder, ignore_errors=True)


class _DamageReported:
    """`SessionStore._damage_reported`: a context manager that turns an SQLite error meaning
    the database file is damaged into the StoreError saying what to do (a class, not a
    generator: every commit enters it twice)."""

    __slots__ = ("_home",)

    def __init__(self, home: Path) -> None:
        self._home = home

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        if isinstance(error, sqlite3.DatabaseError):
            report = damaged(error, soul_home.db_path(self._home))
            if report is not None:
                raise report from error
