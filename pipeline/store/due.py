"""What `soul worker`'s scheduler reads to decide what is due, in few queries (a mixin of
`SessionStore`).

- `cycle_counts(soul, sessions)`: the highest committed cycle of every (session, process) of
  a soul (or of the sessions named) and when it was committed, in one grouped query (the scheduler reads it once, then follows its own workflows).
- `session_marks(soul, shards)`: every session's id, turn count, creation and last-change
  time and user, in one query per poll, of the worker's own shards only
  (`soul.store.shards`): a session whose `updated` did not move needs nothing re-read.
- `trigger_marks(session)`: for the triggers of one changed session, what the store says of
  its pending impulses (S_loud committed after the session's last turn), its last user
  message and its last spontaneous turn, in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass

from soul.store.connection import Connection

LAST_TURN = ("SELECT coalesce(max(id), 0) FROM commits WHERE session_id = ?"
             " AND kind IN ('message', 'spontaneous')")
"""The commit id of a session's last turn (0: none). Every turn, a user's or a spontaneous
one, takes the S_loud impulses committed before it: those after it are pending."""


@dataclass(frozen=True)
class SessionMark:
    """A session as the scheduler polls it."""

    id: str
    turns: int
    created: float
    updated: float
    user: str = "user"


@dataclass(frozen=True)
class Impulse:
    """An S_loud impulse no turn has taken yet."""

    commit_id: int
    time: float
    process: str | None
    trigger: bool  # the cycle asked for a spontaneous turn at once


@dataclass(frozen=True)
class TriggerMarks:
    """What a session's triggers are decided from."""

    session_id: str
    last_turn_commit: int  # the last turn of any kind (0: none): it took the impulses before it
    last_message_commit: int  # the last user message's commit (0: none)
    last_message_time: float  # its time (the session's creation when none)
    last_spontaneous_time: float  # the last spontaneous turn's time (0: none)
    pending: tuple[Impulse, ...]  # oldest first
    unanswered: int = 0  # spontaneous turns that spoke since the last user message


class Due:
    """The scheduler's reads (see the module doc)."""

    _read: Callable[[], AbstractContextManager[Connection]]

    def cycle_counts(self, soul: str, sessions: Collection[str] | None = None
                     ) -> dict[tuple[str, str], tuple[int, float]]:
        """(session id, process) -> (its highest committed cycle, its last cycle commit's
        time), for the sessions of `soul` that have one (all of them, or those in `sessions`;
        a missing key means none)."""
        query = (
            "SELECT c.session_id, c.process, max(c.cycle), max(c.time) FROM commits c"
            " JOIN sessions s ON s.id = c.session_id"
            " WHERE s.soul = ? AND c.kind = 'cycle' AND c.process IS NOT NULL"
        )
        wanted = sorted(sessions) if sessions is not None else None
        chunks = [wanted[i:i + 500] for i in range(0, len(wanted), 500)] if wanted is not None else [None]
        out: dict[tuple[str, str], tuple[int, float]] = {}
        with self._read() as conn:
            for chunk in chunks:
                where, args = "", (soul,)
                if chunk is not None:
                    where = f" AND c.session_id IN ({', '.join('?' * len(chunk))})"
                    args += tuple(chunk)
                rows = conn.execute(query + where + " GROUP BY c.session_id, c.process", args).fetchall()
                out.update({(r[0], r[1]): (int(r[2] or 0), float(r[3] or 0.0)) for r in rows})
        return out

    def session_marks(self, soul: str, shards: Collection[int] | None = None) -> list[SessionMark]:
        """Every session of `soul` (in these shards only, when given): id, turns, created,
        updated, user (oldest first)."""
        query = "SELECT id, turns, created, updated, user FROM sessions WHERE soul = ?"
        args: tuple[object, ...] = (soul,)
        if shards is not None:
            if not shards:
                return []
            wanted = sorted(shards)
            query += f" AND shard IN ({', '.join('?' * len(wanted))})"
            args += tuple(wanted)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY created, rowid", args).fetchall()
        return [SessionMark(r[0], int(r[1]), float(r[2]), float(r[3]), str(r[4])) for r in rows]

    def trigger_marks(self, session_id: str) -> TriggerMarks:
        """The session's pending impulses, last user message and last spontaneous turn."""
        with self._read() as conn:
            created = conn.execute(
                "SELECT created FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            last_turn = conn.execute(LAST_TURN, (session_id,)).fetchone()[0]
            message = conn.execute(
                "SELECT id, time FROM commits WHERE session_id = ? AND kind = 'message'"
                " ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            spontaneous = conn.execute(
                "SELECT coalesce(max(time), 0) FROM commits WHERE session_id = ?"
                " AND kind = 'spontaneous'",
                (session_id,),
            ).fetchone()[0]
            unanswered = conn.execute(
                "SELECT count(DISTINCT c.id) FROM commits c JOIN messages m ON m.commit_id = c.id"
                " WHERE c.session_id = ? AND c.kind = 'spontaneous' AND c.id > ?"
                " AND m.layer = 'external' AND m.tag <> 'user'",
                (session_id, int(message[0]) if message else 0),
            ).fetchone()[0]
            rows = conn.execute(
                "SELECT m.commit_id, m.time, c.process, m.meta FROM messages m"
                " JOIN commits c ON c.id = m.commit_id"
                " WHERE m.session_id = ? AND m.tag = 'S_loud' AND m.commit_id > ? ORDER BY m.id",
                (session_id, last_turn),
            ).fetchall()
        pending = tuple(
            Impulse(int(r[0]), float(r[1]), r[2], json.loads(r[3] or "{}").get("trigger") is True)
            for r in rows
        )
        return TriggerMarks(
            session_id,
            int(last_turn),
            int(message[0]) if message else 0,
            float(message[1]) if message else float(created[0] if created else 0.0),
            float(spontaneous or 0.0),
            pending,
            int(unanswered or 0),
        )
