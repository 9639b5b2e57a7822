"""Commit notices across processes (PostgreSQL only): NOTIFY in each commit, LISTEN elsewhere.

Every commit on the PostgreSQL store sends, inside its own transaction, a notification on its
soul's channel (`channel(soul)`: `soul:<name>`). The payload carries ids only —
`<session id> <commit id> <origin>` — never text: a listener reads the commit's rows from the
store (`Notices.stored_commit`), so a notice is small, never redacted twice, and is delivered
only if the commit is (PostgreSQL sends notifications at COMMIT, in commit order). `origin`
names the committing process (`ORIGIN`, random per process), so a listener can skip what its
own process committed and already announced.

`Listener` holds one dedicated autocommit connection per channel, LISTENs and hands each
`Notice` to a callback from a thread of its own. A lost connection is re-made with backoff,
and the callback then gets None: notices may have been missed, read the store again.

On SQLite nothing is sent and nothing listens (`Dialect.notify` is a no-op there): one file
serves one machine, and the process holding a session already announces its events.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from soul.records import MessageRecord
from soul.store.connection import Connection
from soul.store.conninfo import mask_passwords
from soul.store.due import LAST_TURN

log = logging.getLogger(__name__)

ORIGIN = uuid.uuid4().hex[:12]  # this process, in the notices it sends
PREFIX = "soul:"
MAX_CHANNEL = 63  # PostgreSQL's identifier length


def channel(soul: str) -> str:
    """The notification channel of a soul's commits (a long name is cut and hashed)."""
    name = PREFIX + soul
    if len(name.encode("utf-8")) <= MAX_CHANNEL:
        return name
    return PREFIX + hashlib.sha256(soul.encode("utf-8")).hexdigest()[:40]


@dataclass(frozen=True)
class Notice:
    """A commit was made: which session, which commit, by which process."""

    session_id: str
    commit_id: int
    origin: str

    @property
    def payload(self) -> str:
        return f"{self.session_id} {self.commit_id} {self.origin}"

    @classmethod
    def parse(cls, payload: str) -> Notice | None:
        """The notice in a payload; None for one this version does not read."""
        parts = payload.split(" ")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])


@dataclass(frozen=True)
class StoredCommit:
    """One commit as a listener needs it: its kind, numbers, messages and mood."""

    session_id: str
    id: int
    kind: str  # message, spontaneous, subprocess, cycle
    turn: int
    process: str | None
    cycle: int | None
    time: float
    messages: tuple[MessageRecord, ...]
    mood: tuple[str, str] | None  # (mood, criteria) when the cycle set one
    steps: dict[str, dict[str, Any]]  # step -> outputs, from the commit's trace
    pending_impulses: int  # S_loud impulses of the session no turn has taken yet
    # step -> (kind, status) from the trace, in the order the steps ran
    kinds: dict[str, tuple[str, str]] = field(default_factory=dict)


class Notices:
    """Reading a notified commit back (a mixin of `SessionStore`)."""

    _read: Callable[[], AbstractContextManager[Connection]]

    def turn_commit(self, session_id: str, turn: int) -> StoredCommit | None:
        """The turn (a user's or a spontaneous one) that made the session's turn `turn`, or
        None: what a turn re-run after a crash answers with, having found itself committed."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT id FROM commits WHERE session_id = ? AND turn = ? AND kind IN ('message', 'spontaneous')"
                " ORDER BY id LIMIT 1", (session_id, turn),
            ).fetchone()
        return self.stored_commit(int(row[0])) if row is not None else None

    def stored_commit(self, commit_id: int) -> StoredCommit | None:
        """The commit with this id, or None (deleted, or another schema's)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT session_id, kind, turn, process, cycle, time FROM commits WHERE id = ?",
                (commit_id,),
            ).fetchone()
            if row is None:
                return None
            sid = row[0]
            messages = conn.execute(
                "SELECT layer, tag, content, step, verb, meta FROM messages WHERE commit_id = ?"
                " ORDER BY id",
                (commit_id,),
            ).fetchall()
            mood = conn.execute(
                "SELECT mood, criteria FROM mood_and_criteria WHERE session_id = ? AND commit_id = ?",
                (sid, commit_id),
            ).fetchone()
            trace = conn.execute(
                "SELECT json FROM traces WHERE commit_id = ?", (commit_id,)
            ).fetchone()
            pending = conn.execute(*pending_impulses_query(sid)).fetchone()[0]
        outputs, kinds = _steps(json.loads(trace[0]) if trace else {})
        return StoredCommit(
            sid, commit_id, row[1], int(row[2]), row[3], row[4], float(row[5]),
            tuple(MessageRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in messages),
            (mood[0], mood[1]) if mood else None,
            outputs,
            int(pending),
            kinds,
        )


def pending_impulses_query(session_id: str) -> tuple[str, tuple[Any, ...]]:
    """SQL counting the S_loud impulses committed after the session's last turn (any turn
    takes the pending impulses: a user message or a spontaneous turn)."""
    return (
        f"SELECT count(*) FROM messages WHERE session_id = ? AND tag = 'S_loud' AND commit_id > ({LAST_TURN})",
        (session_id, session_id),
    )


def _steps(trace: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, str]]]:
    """Each traced step's outputs, and its (kind, status), in the order the steps ran."""
    outputs: dict[str, dict[str, Any]] = {}
    kinds: dict[str, tuple[str, str]] = {}
    for step in trace.get("steps") or ():
        if isinstance(step, dict) and isinstance(step.get("step"), str):
            given = step.get("outputs")
            outputs[step["step"]] = dict(given) if isinstance(given, dict) else {}
            kinds[step["step"]] = (str(step.get("kind") or ""), str(step.get("status") or "ran"))
    return outputs, kinds


class Listener:
    """LISTEN on one channel from a thread; `on_notice(Notice)` per notification, and
    `on_notice(None)` after a reconnect (notices may have been missed meanwhile)."""

    def __init__(self, url: str, name: str, on_notice: Callable[[Notice | None], None]) -> None:
        self.url, self.channel, self.on_notice = url, name, on_notice
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()  # set once LISTEN is in effect (tests wait on it)
        self.received = 0

    def start(self) -> Listener:
        self._thread = threading.Thread(target=self._run, name=f"listen {self.channel}", daemon=True)
        self._thread.start()
        return self

    def wait_listening(self, timeout: float = 10.0) -> bool:
        """Wait until the LISTEN is in effect (True), or `timeout` seconds (False)."""
        return self.listening.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        delay, first = 0.2, True
        while not self._stop.is_set():
            try:
                for notice in self._notices(first):
                    delay = 0.2
                    self._deliver(notice)
            except Exception as exc:  # the server went away: listen again, then say so
                self.listening.clear()
                log.warning("listening on %s failed (%s); again in %.1f s", self.channel,
                            mask_passwords(str(exc), self.url), delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)
            first = False

    def _notices(self, first: bool) -> Iterator[Notice | None]:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self.listening.set()
            if not first:
                yield None  # reconnected: what happened meanwhile was not heard
            while not self._stop.is_set():
                for note in conn.notifies(timeout=0.5):
                    notice = Notice.parse(note.payload)
                    if notice is not None:
                        yield notice
                    if self._stop.is_set():
                        return

    def _deliver(self, notice: Notice | None) -> None:
        if notice is not None:
            self.received += 1
        try:
            self.on_notice(notice)
        except Exception:  # a callback's bug must not stop the listening
            log.exception("a commit listener on %s failed", self.channel)

