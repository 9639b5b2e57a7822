"""A session through time: its commits in order, the trace of any of them, and its layers
(soul state, working memory by region, user model, mood) as they were after any turn.

A mixin of `SessionStore` over its read transactions. What a session was after turn N is read
from the commits up to N: the soul state and Chetana's of the last commit that carried one
(`commits.state`, kept since migration m003; a change older than that is not known, and says
so), the working-memory rows of turns up to N, the latest mood up to N, and the user model's
version current when turn N committed, in the line of versions the session reads (its own for
a fork: `sessions.user_model_key`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from soul.errors import SessionNotFound, StoreError
from soul.store.connection import Connection
from soul.store.database import dicts
from soul.store.user_models import VERSION_COLUMNS

__all__ = ["Timeline", "carried", "line_of"]


def line_of(conn: Connection, session_id: str) -> tuple[str, str, str, int]:
    """(soul, user, the name its user-model versions are kept under, turns) of a session."""
    row = conn.execute(
        "SELECT soul, user, coalesce(user_model_key, user), turns FROM sessions WHERE id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return row[0], row[1], row[2], int(row[3])


def carried(conn: Connection, session_id: str, turn: int, what: str) -> tuple[bool, Any]:
    """The `state` or `chetana` after turn `turn`: (known, value). The value is that of the
    last commit up to `turn` whose event says it carried one (None: none did); not known when
    that commit predates `commits.state` (migration m003)."""
    rows = conn.execute(
        f"SELECT meta, {what} FROM commits WHERE session_id = ? AND turn <= ? ORDER BY id DESC",
        (session_id, turn),
    ).fetchall()
    for meta, value in rows:
        if json.loads(meta or "{}").get(what):
            return (value is not None), (json.loads(value) if value is not None else None)
    return True, None


class Timeline:
    """The time side of `SessionStore`: commits, traces by commit, layers after a turn."""

    _read: Callable[[], AbstractContextManager[Connection]]

    def user_model_line(self, session_id: str) -> tuple[str, str]:
        """(soul, the name the session's user-model versions are kept under): its user, or
        for a fork its own line (`user_model`, `user_model_history` and `revert_user_model`
        take that name)."""
        with self._read() as conn:
            soul, _, key, _ = line_of(conn, session_id)
        return soul, key

    def commit_list(self, session_id: str) -> list[dict[str, Any]]:
        """Every commit of a session in order: {"commit", "turn", "kind", "process", "cycle",
        "time"} — turns, spontaneous turns, subprocesses and background cycles alike."""
        with self._read() as conn:
            line_of(conn, session_id)
            return dicts(
                conn,
                'SELECT id AS "commit", turn, kind, process, cycle, time FROM commits'
                " WHERE session_id = ? ORDER BY id",
                session_id,
            )

    def commit_trace(self, session_id: str, commit: int) -> dict[str, Any]:
        """The trace stored with commit `commit` of the session."""
        with self._read() as conn:
            line_of(conn, session_id)
            row = conn.execute(
                "SELECT json FROM traces WHERE session_id = ? AND commit_id = ?", (session_id, commit)
            ).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} has no commit {commit} (see its commits: GET .../commits)")
        return json.loads(row[0])  # type: ignore[no-any-return]

    def layers(self, session_id: str, turn: int | None = None) -> dict[str, Any]:
        """The session's layers now, or as they were after turn `turn`."""
        with self._read() as conn:
            soul, user, key, turns = line_of(conn, session_id)
            at = turns if turn is None else turn
            if not 0 <= at <= turns:
                raise StoreError(f"session {session_id} has turns 0–{turns}: there is no turn {at}")
            now = at == turns
            if now:
                row = conn.execute("SELECT json FROM state WHERE session_id = ?", (session_id,)).fetchone()
                known, state = True, json.loads(row[0]) if row else {}
            else:
                known, state = carried(conn, session_id, at, "state")
            last = conn.execute(
                "SELECT max(time) FROM commits WHERE session_id = ? AND turn <= ?", (session_id, at)
            ).fetchone()[0]
            memory = dicts(
                conn,
                "SELECT region, entry_type, content, verb, meta, turn FROM working_memory"
                " WHERE session_id = ? AND turn <= ? ORDER BY id",
                session_id, at,
            )
            mood = dicts(
                conn,
                "SELECT mood, criteria, process, cycle, turn FROM mood_and_criteria"
                " WHERE session_id = ? AND turn <= ? ORDER BY id DESC LIMIT 1",
                session_id, at,
            )
            versions = dicts(
                conn,
                f"SELECT {VERSION_COLUMNS} FROM user_models WHERE soul = ? AND user = ? ORDER BY version",
                soul, key,
            )
        regions: dict[str, list[dict[str, Any]]] = {}
        for entry in memory:
            regions.setdefault(entry.pop("region"), []).append(entry)
        if now:
            current = versions[-1]["version"] if versions else 0
        else:
            current = max((v["version"] for v in versions if last is not None and v["created"] <= last), default=0)
        model = next((v for v in versions if v["version"] == current), None)
        return {
            "session": session_id, "turn": at, "turns": turns, "now": now,
            "state": state if known else None, "state_known": known,
            "memory": regions, "mood": mood[0] if mood else None,
            "user_model": {"user": user, "line": key, "version": current, "text": model["text"] if model else "",
                           "versions": [{k: v for k, v in x.items() if k != "text"} for x in versions]},
        }
