"""Exporting a whole session as JSON-safe data (`soul sessions export`, backups): its rows,
moods, summaries and Persona Cores included."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict
from typing import Any

from soul.errors import SessionNotFound
from soul.records import SessionInfo, UserModelVersion
from soul.store.connection import Connection
from soul.store.database import dicts
from soul.store.user_models import VERSION_COLUMNS

SESSION_COLUMNS = "id, soul, user, turns, created, updated, blueprint, forked_from, forked_at"


class Export:
    """The export side of `SessionStore` (a mixin over its read transactions)."""

    _read: Callable[[], AbstractContextManager[Connection]]
    _traces: Callable[[Connection, str], list[dict[str, Any]]]

    def export_session(self, session_id: str) -> dict[str, Any]:
        """The whole session as JSON-safe data: for `soul sessions export` and backups."""
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS}, status FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r}")
            info = SessionInfo(*row[:-1])

            def one(query: str) -> Any:
                found = conn.execute(query, (session_id,)).fetchone()
                return json.loads(found[0]) if found else None

            state = one("SELECT json FROM state WHERE session_id = ?")
            chetana = one("SELECT json FROM chetana WHERE session_id = ?")
            messages = dicts(
                conn,
                "SELECT turn, cycle, time, layer, tag, step, verb, content, meta FROM messages"
                " WHERE session_id = ? ORDER BY id",
                session_id,
            )
            memory = dicts(
                conn,
                "SELECT turn, time, region, entry_type, verb, content, meta FROM working_memory"
                " WHERE session_id = ? ORDER BY id",
                session_id,
            )
            traces = self._traces(conn, session_id)
            moods = dicts(
                conn,
                "SELECT turn, cycle, process, time, mood, criteria FROM mood_and_criteria"
                " WHERE session_id = ? ORDER BY id",
                session_id,
            )
            summaries = dicts(
                conn,
                "SELECT turn_to AS turn, process, time, layer, cycle_from, cycle_to, digest,"
                " summary FROM context_summaries WHERE session_id = ? ORDER BY id",
                session_id,
            )
            cores = dicts(
                conn,
                "SELECT process, path, sha256, time, text FROM persona_cores"
                " WHERE session_id = ? ORDER BY rowid",
                session_id,
            )
            history = conn.execute(
                f"SELECT {VERSION_COLUMNS} FROM user_models WHERE soul = ? AND user = ?"
                " ORDER BY version",
                (info.soul, info.user),
            ).fetchall()
        versions = [asdict(UserModelVersion(*h)) for h in history]
        return {
            "session": {**asdict(info), "status": row[-1]},
            "state": state or {},
            "chetana": chetana,
            "user_model": versions[-1] if versions else None,
            "user_model_history": versions,
            "messages": messages,
            "memory": memory,
            "traces": traces,
            "moods": moods,
            "summaries": [{**s, "digest": bool(s["digest"])} for s in summaries],
            "persona_cores": cores,
        }
