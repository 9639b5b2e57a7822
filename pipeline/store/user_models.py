"""User models, per (soul, user), versioned: every update is a new version with its note."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from soul.errors import StoreError
from soul.records import UserModelVersion
from soul.store.connection import Connection
from soul.store.dialect import dialect_of

T = TypeVar("T")

VERSION_COLUMNS = "version, text, note, session_id, turn, created"


class UserModels:
    """The user-model side of `SessionStore` (a mixin over its connection and transactions)."""

    _conn: Connection
    _lock: Any
    _write: Callable[..., Any]

    def user_model(self, soul: str, user: str) -> UserModelVersion | None:
        """The latest version of the user model, or None before the first update."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT {VERSION_COLUMNS} FROM user_models WHERE soul = ? AND user = ?"
                " ORDER BY version DESC LIMIT 1",
                (soul, user),
            ).fetchone()
        return UserModelVersion(*row) if row else None

    def user_model_history(self, soul: str, user: str) -> list[UserModelVersion]:
        """Every version, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {VERSION_COLUMNS} FROM user_models WHERE soul = ? AND user = ?"
                " ORDER BY version",
                (soul, user),
            ).fetchall()
        return [UserModelVersion(*r) for r in rows]

    def revert_user_model(
        self, soul: str, user: str, version: int, note: str = ""
    ) -> UserModelVersion:
        """Write a new version whose text is that of `version` (history is never rewritten)."""
        now = time.time()
        note = note or f"reverted to version {version}"

        def body(conn: Connection) -> UserModelVersion:
            dialect_of(conn).lock(conn, f"user_model {soul!r} {user!r}")
            old = conn.execute(
                "SELECT text FROM user_models WHERE soul = ? AND user = ? AND version = ?",
                (soul, user, version),
            ).fetchone()
            if old is None:
                raise StoreError(
                    f"the user model of {user!r} with {soul!r} has no version {version}"
                )
            latest = conn.execute(
                "SELECT max(version) FROM user_models WHERE soul = ? AND user = ?", (soul, user)
            ).fetchone()[0]
            new = UserModelVersion(latest + 1, old[0], note, None, None, now)
            conn.execute(
                "INSERT INTO user_models (soul, user, version, text, note, session_id, turn,"
                " created) VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)",
                (soul, user, new.version, new.text, note, now),
            )
            return new

        return self._write(body)
