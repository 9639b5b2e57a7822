"""Reading a session back: the snapshot a turn starts from, its messages and its traces.

A mixin of `SessionStore` (soul.store.sessions) over its read transactions: each read is one
transaction, so it sees one consistent state while writers carry on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from soul.errors import SessionNotFound, StoreError
from soul.records import MemoryEntry, MessageRecord, SessionInfo, Snapshot
from soul.store.connection import Connection
from soul.store.database import dicts
from soul.store.export import SESSION_COLUMNS
from soul.store.heads import Head, Heads, data_version
from soul.store.logs import dumps

__all__ = ["Reading", "Seen", "SeenSessions", "decoded_meta", "message_record", "session_info"]

_DECODER = json.JSONDecoder()
_SCAN = json.scanner.c_make_scanner and json.scanner.c_make_scanner(_DECODER)  # its C scanner


def _decode(text: str) -> Any:
    """`json.loads(text)`: the C scanner at once for what the store wrote (no whitespace around
    the value), which skips two Python calls and two regex matches a value; anything else (and
    any error) through the decoder, which says what json.loads says."""
    if _SCAN is not None:
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            pass
        else:
            if end == len(text):
                return value
    return _DECODER.decode(text)


# The session row with its state, its Chetana state and its latest user model, in one statement
# (four, each its own round through the driver, before): read every turn. The last user-model
# check is a message, kept with the session's messages (`Seen.check`).
_MODEL_OF = (
    "FROM user_models WHERE soul = sessions.soul"
    " AND user = coalesce(sessions.user_model_key, sessions.user) ORDER BY version DESC LIMIT 1"
)
_SNAPSHOT_HEAD = (
    f"SELECT {SESSION_COLUMNS},"
    " (SELECT json FROM state WHERE session_id = sessions.id),"
    " (SELECT json FROM chetana WHERE session_id = sessions.id),"
    f" (SELECT version {_MODEL_OF}), (SELECT text {_MODEL_OF}),"
    # what the session's working memory and messages are made of (see `Seen`)
    " (SELECT coalesce(max(id), 0) FROM commits WHERE session_id = sessions.id),"
    " (SELECT count(*) FROM working_memory WHERE session_id = sessions.id)"
    " FROM sessions WHERE id = ?"
)
_LAST_CHECK = (  # the last user-model check (the Samantha-Dreams gate)
    "SELECT content, meta FROM messages WHERE session_id = ? AND tag = 'user_model_check'"
    " ORDER BY id DESC LIMIT 1"
)
# decoded rows (working-memory entries and messages, ~0.3 KiB each) a store keeps between
# snapshots, over all sessions: ~3 MiB at most (a claudius session of 8 turns holds ~45)
SEEN_ROWS = 8192


@dataclass(frozen=True, slots=True)
class Seen:
    """A session's working memory (with each entry's time, for the TTL), its last `recent`
    messages and the result of its last user-model check as a snapshot read them, kept by the
    store for the next snapshot.

    They are what the session's commits up to `commit` wrote, less the working-memory rows
    deleted since (expired): rows of both tables are only ever added by a commit (a new commit
    id, never reused) and deleted with their session or, working memory, when expired. So a
    snapshot that finds the session's last commit id and working-memory count unchanged takes
    them as they are, and a commit of this store whose previous commit is `commit` extends
    them with its own rows (`extended`); anything else (another process's commit, an expiry)
    shows as a different id or count, and the rows are read again.
    """

    commit: int  # the session's last commit id when they were read
    memory_count: int  # its working-memory rows then, expired ones included
    memory: tuple[MemoryEntry, ...]
    times: tuple[float, ...]  # each entry's time
    recent: int  # how many messages were asked for
    messages: tuple[MessageRecord, ...]  # the last `recent`, oldest first
    check: bool | None  # the last user-model check's result (`_check_result`), None for none

    @property
    def size(self) -> int:
        """The decoded rows held."""
        return len(self.memory) + len(self.messages)

    def extended(self, commit: int, memory: tuple[MemoryEntry, ...], at: float,
                 messages: tuple[MessageRecord, ...]) -> Seen:
        """These with a commit's rows added (its entries and messages as a read gives them back)."""
        kept = (self.messages + messages)[-self.recent:] if self.recent > 0 else ()
        check = self.check
        for m in reversed(messages):
            if m.tag == "user_model_check":
                check = _check_result(m.content, m.meta)
                break
        return Seen(commit, self.memory_count + len(memory), self.memory + memory,
                    self.times + (at,) * len(memory), self.recent, kept, check)


class SeenSessions:
    """The `Seen` rows of a store's sessions, within `budget` decoded rows in all: a session
    that would go past it pushes out the least recently kept ones (thread-safe)."""

    def __init__(self, budget: int = SEEN_ROWS) -> None:
        self._by_id: dict[str, Seen] = {}
        self._rows = 0
        self._budget = budget
        self._lock = threading.Lock()

    def get(self, session_id: str) -> Seen | None:
        return self._by_id.get(session_id)

    def put(self, session_id: str, seen: Seen) -> None:
        with self._lock:
            self._drop(session_id)
            if seen.size > self._budget:
                return  # a session with more rows than the whole budget is read each time
            while self._rows + seen.size > self._budget:
                self._drop(next(iter(self._by_id)))
            self._by_id[session_id] = seen
            self._rows += seen.size

    def committed(self, session_id: str, previous: int, commit: int, memory: Sequence[MemoryEntry],
                  messages: Sequence[MessageRecord], at: float) -> None:
        """A commit of this store (`commit`, at time `at`, the session's commit before it
        `previous`) wrote these rows: the session's kept ones extended with them when they are
        those up to `previous` (nothing else was committed since they were read), else dropped."""
        seen = self._by_id.get(session_id)
        if seen is None:
            return
        if seen.commit != previous:
            self.drop(session_id)
            return
        self.put(session_id, seen.extended(
            commit, tuple(_as_read(m, MemoryEntry) for m in memory), at,
            tuple(_as_read(m, MessageRecord) for m in messages)))

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        old = self._by_id.pop(session_id, None)
        if old is not None:
            self._rows -= old.size
_HEAD_SESSION = len(SESSION_COLUMNS.split(","))  # the session's columns come first


def decoded_meta(text: str) -> Any:
    """A stored meta decoded; the empty one (most working-memory entries and messages) without
    the decoder: a snapshot decodes dozens a turn."""
    return {} if text == "{}" else _decode(text)


def _as_read(record: Any, kind: type[Any]) -> Any:
    """A message or memory entry of a commit as a read of its row gives it back: itself when its
    meta is a plain dict (what its stored JSON decodes to), else rebuilt with that decoding."""
    if type(record) is kind and type(record.meta) is dict:
        return record
    fields = [getattr(record, name) for name in kind.__slots__ if name != "meta"]
    return kind(*fields, meta=decoded_meta(dumps(record.meta) if record.meta else "{}"))



class Reading:
    """The read side of `SessionStore`: snapshots, messages, traces."""

    _conn: Connection
    _lock: Any
    _read: Callable[[], AbstractContextManager[Connection]]
    _damage_reported: Callable[[], AbstractContextManager[None]]
    _write: Callable[..., Any]
    _chetana_written: dict[str, tuple[str, Any]]
    _seen: SeenSessions
    _heads: Heads | None  # None on PostgreSQL
    _writes: int

    def snapshot(
        self, session_id: str, *, recent: int = 20, ttl_hours: float | None = None
    ) -> Snapshot:
        """What the next turn starts from, read in one consistent transaction.

        `ttl_hours` drops working-memory entries older than that (and deletes them afterwards,
        lazily: the seed's 72-hour thread TTL).

        When the store keeps the session's rows (`Seen`), the session's head is read first in one
        statement (a read transaction of its own), and the rows are taken as kept if it says
        nothing changed them; else everything is read again in one transaction.
        """
        cutoff = time.time() - ttl_hours * 3600 if ttl_hours is not None else None
        seen = self._seen.get(session_id)
        row = None
        if seen is not None and seen.recent == recent:
            with self._lock, self._damage_reported():
                # the head this store's last commit left, if nothing was written since (SQLite)
                heads = self._heads
                row = heads.kept(self._conn, session_id, self._writes) if heads is not None else None
                if row is None:
                    row = self._head(self._conn, session_id)
            if row is not None and (row[-2], row[-1]) != (seen.commit, seen.memory_count):
                row = None  # changed since: read it all again, in one transaction
        if row is None:
            with self._read() as conn:
                row = self._head(conn, session_id)
                if row is None:
                    raise SessionNotFound(f"no session {session_id!r}")
                last_commit, memory_count = row[-2:]
                seen = self._seen.get(session_id)
                if seen is None or (seen.commit, seen.memory_count, seen.recent) != (last_commit, memory_count, recent):
                    seen = self._read_rows(conn, session_id, recent, last_commit)
        assert seen is not None
        info = session_info(row[:_HEAD_SESSION])
        state_json, chetana_json, model_version, model_text = row[_HEAD_SESSION:-2]
        if cutoff is None or not seen.times or min(seen.times) >= cutoff:
            memory = seen.memory
        else:
            memory = tuple(m for m, at in zip(seen.memory, seen.times, strict=True) if at >= cutoff)
            self._expire_memory(session_id, cutoff)
        return Snapshot(
            session=info,
            state=_decode(state_json) if state_json is not None else {},
            user_model=model_text if model_text is not None else "",
            user_model_version=model_version or 0,
            memory=memory,
            recent=seen.messages,
            chetana=self._chetana(session_id, chetana_json),
            last_user_model_check=seen.check,
        )

    def _head(self, conn: Connection, session_id: str) -> tuple[Any, ...] | None:
        """The session's snapshot head, read (None: no such session); on SQLite kept with the
        data version read just before it (`soul.store.heads`). Under the store's lock."""
        heads = self._heads
        if heads is None:
            return conn.execute(_SNAPSHOT_HEAD, (session_id,)).fetchone()  # type: ignore[no-any-return]
        version = data_version(conn)
        row = conn.execute(_SNAPSHOT_HEAD, (session_id,)).fetchone()
        if row is not None:
            heads.keep(session_id, Head(tuple(row), version, self._writes))
        return row  # type: ignore[no-any-return]

    def _read_rows(self, conn: Connection, session_id: str, recent: int, last_commit: int) -> Seen:
        """The session's working memory, last `recent` messages and last user-model check,
        read and decoded (in the snapshot's transaction), and kept for the next snapshot."""
        memory_rows = conn.execute(
            "SELECT region, entry_type, content, verb, meta, time FROM working_memory"
            " WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
        recent_rows = (
            conn.execute(
                "SELECT layer, tag, content, step, verb, meta FROM messages"
                " WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                (session_id, recent),
            ).fetchall()
            if recent > 0
            else []
        )
        check = conn.execute(_LAST_CHECK, (session_id,)).fetchone()
        seen = Seen(
            last_commit,
            len(memory_rows),
            tuple(MemoryEntry(region, entry_type, content, verb, decoded_meta(meta))
                  for region, entry_type, content, verb, meta, _ in memory_rows),
            tuple(row[5] for row in memory_rows),
            recent,
            tuple(message_record(*r) for r in reversed(recent_rows)),
            _check_result(check[0], decoded_meta(check[1])) if check is not None else None,
        )
        self._seen.put(session_id, seen)
        return seen

    def _chetana(self, session_id: str, text: str | None) -> Any:
        """The session's stored Chetana state, decoded from `text` (what the snapshot read):
        the value this store's last commit of the session wrote it from, when the text is still
        exactly that commit's (`Commits.apply` keeps the pair), so a turn's snapshot does not
        decode again what the turn before it encoded (2.9 KB of JSON, ~40 us, a claudius turn).
        The text is always read: another writer's state is a different text, and decoded."""
        if text is None:
            return None
        written = self._chetana_written.get(session_id)
        if written is not None and written[0] == text:
            return written[1]
        return _decode(text)

    def _expire_memory(self, session_id: str, cutoff: float) -> None:
        self._write(
            lambda conn: conn.execute(
                "DELETE FROM working_memory WHERE session_id = ? AND time < ?",
                (session_id, cutoff),
            )
        )

    def messages(
        self, session_id: str, *, layer: str | None = None
    ) -> list[tuple[int, MessageRecord, float]]:
        """Every message of a session, oldest first, as (turn, record, time)."""
        query = (
            "SELECT turn, layer, tag, content, step, verb, meta, time FROM messages"
            " WHERE session_id = ?"
        )
        args: tuple[Any, ...] = (session_id,)
        if layer is not None:
            query += " AND layer = ?"
            args += (layer,)
        with self._read() as conn:
            self._require(conn, session_id)
            rows = conn.execute(query + " ORDER BY id", args).fetchall()
        return [(r[0], message_record(*r[1:7]), r[7]) for r in rows]

    def trace(self, session_id: str, turn: int) -> dict[str, Any]:
        """The trace of the commit that made `turn` (its first commit at that turn)."""
        with self._read() as conn:
            self._require(conn, session_id)
            row = conn.execute(
                "SELECT json FROM traces WHERE session_id = ? AND turn = ?"
                " ORDER BY commit_id LIMIT 1",
                (session_id, turn),
            ).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} has no trace for turn {turn}")
        return json.loads(row[0])

    def traces(self, session_id: str) -> list[dict[str, Any]]:
        """Every trace of a session in commit order: {"commit", "turn", "kind", "trace"}."""
        with self._read() as conn:
            self._require(conn, session_id)
            return self._traces(conn, session_id)

    @staticmethod
    def _traces(conn: Connection, session_id: str) -> list[dict[str, Any]]:
        return dicts(
            conn,
            'SELECT commit_id AS "commit", turn, kind, json AS trace FROM traces'
            " WHERE session_id = ? ORDER BY commit_id",
            session_id,
        )

    @staticmethod
    def _require(conn: Connection, session_id: str) -> None:
        if not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
            raise SessionNotFound(f"no session {session_id!r}")


def session_info(row: tuple[Any, ...]) -> SessionInfo:
    return SessionInfo(*row)


def message_record(
    layer: Any, tag: str, content: str, step: str | None, verb: str | None, meta: str
) -> MessageRecord:
    return MessageRecord(layer, tag, content, step, verb, decoded_meta(meta))


def _check_result(content: str, meta: Any) -> bool | None:
    """A user-model check's result from its message (`meta` decoded): the runtime stores the
    parsed boolean as meta {"result": bool}; the text is the fallback."""
    result = meta.get("result") if type(meta) is dict else None
    if isinstance(result, bool):
        return result
    return content.strip().lower() in ("true", "yes", "1")
