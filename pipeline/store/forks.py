"""Forking a session at a turn: a new session that is the old one after turn N (`soul sessions
fork ID --at N`, the page's fork and rewind).

A mixin of `SessionStore`. In one write transaction the fork gets copies of every commit up
to turn N (turns, subprocesses, background cycles stamped with a turn up to N), with their
messages, working memory, traces, moods and summaries, and the session's Persona Cores; its
soul state and Chetana's are those the last of those commits carried; its user model is a
line of its own (`sessions.user_model_key` = `USER@fork:ID`) holding the versions that were
current up to turn N, so what the fork learns of the user never changes the original's. The
original is not touched. The memory field (the resonance engine's, per soul) is not copied: a
fork shares it with every session of its soul (on a partitioned field, its user's partition;
the copied commits carry no `remember` items, so a rebuild does not remember those turns
twice). The fork's JSONL logs are written from the copied rows.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from soul.errors import StoreError
from soul.records import SessionInfo
from soul.store.commits import dumps
from soul.store.connection import Connection
from soul.store.shards import shard_of
from soul.store.timeline import carried, line_of

__all__ = ["Forks", "fork_key"]


def fork_key(user: str, session_id: str) -> str:
    """The name a fork's user-model versions are kept under."""
    return f"{user}@fork:{session_id}"


def _copy(conn: Connection, table: str, columns: str, where: str, args: tuple[Any, ...],
          remap: Callable[[tuple[Any, ...]], tuple[Any, ...] | None]) -> None:
    """Rows of `table` matching `where`, re-inserted as `remap` gives them (None: skipped)."""
    rows = conn.execute(f"SELECT {columns} FROM {table} WHERE {where} ORDER BY {_order(table)}", args).fetchall()
    values = [v for v in (remap(tuple(r)) for r in rows) if v is not None]
    if values:
        names = f"session_id, {columns}"
        marks = ", ".join("?" for _ in names.split(","))
        conn.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)


def _order(table: str) -> str:
    return {"persona_cores": "process", "traces": "commit_id"}.get(table, "id")


class Forks:
    """The fork side of `SessionStore`."""

    _write: Callable[..., Any]
    _mirror: Callable[..., None]

    def fork_session(self, session_id: str, at: int, *, new_id: str | None = None) -> SessionInfo:
        """A new session that is `session_id` after turn `at`; the original is untouched."""
        fork = new_id or uuid.uuid4().hex

        def body(conn: Connection) -> SessionInfo:
            soul, user, line, turns = line_of(conn, session_id)
            if not 0 <= at <= turns:
                raise StoreError(f"session {session_id} has turns 0–{turns}: it cannot be forked at turn {at}")
            blueprint = conn.execute("SELECT blueprint FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
            state = chetana = None
            for what in ("state", "chetana"):
                known, value = carried(conn, session_id, at, what)
                if at == turns:  # the latest: what the session holds now
                    row = conn.execute(f"SELECT json FROM {what} WHERE session_id = ?", (session_id,)).fetchone()
                    known, value = True, json.loads(row[0]) if row else None
                if not known and what == "state":
                    raise StoreError(
                        f"session {session_id} changed its soul state before this version of soul kept each turn's state,"
                        f" so the state after turn {at} is not known: fork it at turn {turns}, its latest")
                if what == "state":
                    state = value
                else:
                    chetana = value if known else None  # not known: the fork's Chetana starts afresh
            now = time.time()
            key = fork_key(user, fork)
            added = conn.execute(
                "INSERT INTO sessions (id, soul, user, blueprint, turns, created, updated, forked_from, forked_at,"
                " user_model_key, shard) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (fork, soul, user, blueprint, at, now, now, session_id, at, key, shard_of(soul, user)),
            ).rowcount
            if not added:
                raise StoreError(f"a session {fork!r} exists already")
            ids: dict[int, int] = {}
            for row in conn.execute(
                "SELECT id, turn, kind, time, meta, process, cycle, state, chetana FROM commits"
                " WHERE session_id = ? AND turn <= ? ORDER BY id", (session_id, at),
            ).fetchall():
                ids[row[0]] = conn.execute(
                    "INSERT INTO commits (session_id, turn, kind, time, meta, process, cycle, state, chetana)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id", (fork, *row[1:]),
                ).fetchone()[0]

            def by_commit(row: tuple[Any, ...]) -> tuple[Any, ...] | None:
                return (fork, ids[row[0]], *row[1:]) if row[0] in ids else None

            where = "session_id = ? AND turn <= ?"
            _copy(conn, "messages", "commit_id, turn, layer, tag, step, verb, content, meta, time, cycle", where,
                  (session_id, at), by_commit)
            _copy(conn, "working_memory", "commit_id, turn, region, entry_type, content, verb, meta, time", where,
                  (session_id, at), by_commit)
            _copy(conn, "traces", "commit_id, turn, kind, json", where, (session_id, at), by_commit)
            _copy(conn, "mood_and_criteria", "commit_id, mood, criteria, turn, time, cycle, process", where, (session_id, at),
                  lambda r: (fork, ids.get(r[0]), *r[1:]) if r[0] is None or r[0] in ids else None)
            _copy(conn, "context_summaries",
                  "commit_id, layer, summary, turn_from, turn_to, time, cycle_from, cycle_to, digest, process",
                  "session_id = ? AND (commit_id IS NOT NULL OR turn_to <= ?)", (session_id, at),
                  lambda r: (fork, ids.get(r[0]), *r[1:]) if r[0] is None or r[0] in ids else None)
            _copy(conn, "persona_cores", "process, path, sha256, text, time", "session_id = ?", (session_id,),
                  lambda r: (fork, *r))
            if state is not None:
                conn.execute("INSERT INTO state (session_id, json) VALUES (?, ?)", (fork, dumps(state)))
            if chetana is not None:
                conn.execute("INSERT INTO chetana (session_id, json) VALUES (?, ?)", (fork, dumps(chetana)))
            last = conn.execute("SELECT max(time) FROM commits WHERE session_id = ?", (fork,)).fetchone()[0]
            versions = conn.execute(
                "SELECT text, note, session_id, turn, created FROM user_models WHERE soul = ? AND user = ?"
                " AND created <= ? ORDER BY version", (soul, line, last if last is not None else -1.0),
            ).fetchall()
            conn.executemany(
                "INSERT INTO user_models (soul, user, version, text, note, session_id, turn, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(soul, key, i, *v) for i, v in enumerate(versions, start=1)],
            )
            return SessionInfo(fork, soul, user, at, now, now, blueprint, session_id, at)

        info: SessionInfo = self._write(body)
        with contextlib.suppress(OSError):  # else written on its next commit or open, as after a crash
            self._mirror(info.id)  # the fork's JSONL logs, from the rows just copied
        return info
