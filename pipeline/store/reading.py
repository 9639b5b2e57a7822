"""Reading a session back: the snapshot a turn starts from, its messages and its traces.

A mixin of `SessionStore` (soul.store.sessions) over its read transactions: each read is one
transaction, so it sees one consistent state while writers carry on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from soul.errors import SessionNotFound, StoreError
from soul.records import MemoryEntry, MessageRecord, SessionInfo, Snapshot
from soul.store.connection import Connection
from soul.store.database import dicts
from soul.store.export import SESSION_COLUMNS

__all__ = ["Reading", "message_record", "session_info"]

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


# The session row with its state, its Chetana state, its latest user model and user-model check,
# in one statement (five, each its own round through the driver, before): read every turn.
_MODEL_OF = (
    "FROM user_models WHERE soul = sessions.soul"
    " AND user = coalesce(sessions.user_model_key, sessions.user) ORDER BY version DESC LIMIT 1"
)
_CHECK_OF = (  # the last user-model check (the Samantha-Dreams gate)
    "FROM messages WHERE session_id = sessions.id AND tag = 'user_model_check' ORDER BY id DESC LIMIT 1"
)
_SNAPSHOT_HEAD = (
    f"SELECT {SESSION_COLUMNS},"
    " (SELECT json FROM state WHERE session_id = sessions.id),"
    " (SELECT json FROM chetana WHERE session_id = sessions.id),"
    f" (SELECT version {_MODEL_OF}), (SELECT text {_MODEL_OF}),"
    f" (SELECT content {_CHECK_OF}), (SELECT meta {_CHECK_OF})"
    " FROM sessions WHERE id = ?"
)
_HEAD_SESSION = len(SESSION_COLUMNS.split(","))  # the session's columns come first


def _meta(text: str) -> Any:
    """A stored meta decoded; the empty one (most working-memory entries and messages) without
    the decoder: a snapshot decodes dozens a turn."""
    return {} if text == "{}" else _decode(text)



class Reading:
    """The read side of `SessionStore`: snapshots, messages, traces."""

    _read: Callable[[], AbstractContextManager[Connection]]
    _write: Callable[..., Any]
    _chetana_written: dict[str, tuple[str, Any]]

    def snapshot(
        self, session_id: str, *, recent: int = 20, ttl_hours: float | None = None
    ) -> Snapshot:
        """What the next turn starts from, read in one consistent transaction.

        `ttl_hours` drops working-memory entries older than that (and deletes them afterwards,
        lazily: the seed's 72-hour thread TTL).
        """
        cutoff = time.time() - ttl_hours * 3600 if ttl_hours is not None else None
        with self._read() as conn:
            row = conn.execute(_SNAPSHOT_HEAD, (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r}")
            info = session_info(row[:_HEAD_SESSION])
            state_json, chetana_json, model_version, model_text, check_content, check_meta = row[_HEAD_SESSION:]
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
        memory = tuple(
            MemoryEntry(region, entry_type, content, verb, _meta(meta))
            for region, entry_type, content, verb, meta, at in memory_rows
            if cutoff is None or at >= cutoff
        )
        if len(memory) < len(memory_rows):
            self._expire_memory(session_id, cutoff)  # type: ignore[arg-type]
        return Snapshot(
            session=info,
            state=_decode(state_json) if state_json is not None else {},
            user_model=model_text if model_text is not None else "",
            user_model_version=model_version or 0,
            memory=memory,
            recent=tuple(message_record(*r) for r in reversed(recent_rows)),
            chetana=self._chetana(session_id, chetana_json),
            last_user_model_check=_check_result(check_content, check_meta),
        )

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
    return MessageRecord(layer, tag, content, step, verb, _meta(meta))


def _check_result(content: str | None, meta: str | None) -> bool | None:
    # The runtime stores the parsed boolean as meta {"result": bool}; the text is the fallback.
    if content is None or meta is None:
        return None
    result = _meta(meta).get("result")
    if isinstance(result, bool):
        return result
    return content.strip().lower() in ("true", "yes", "1")
