"""Events from other processes: commits a `soul worker` (or another `soul serve`) made reach the
WebSocket clients of this server (PostgreSQL only).

`Relay` LISTENs on the soul's commit channel (`soul.store.notify`). Each notice names a
session and a commit; when that session is open here (a hub in `Hubs.open`) the commit is read
back from the store and published to the hub's clients as the events `Session.stream` and
`Session.subscribe` give in-process:

| the commit | events |
|---|---|
| a cycle | `CycleFinished` (its steps' outputs), `MoodChanged` when it set a mood, `ImpulseQueued` when it queued an S_loud impulse |
| a spontaneous turn | `Reply(text, spontaneous=True)` (when it said something), `TurnCommitted` |
| a user turn of another server | `UserMessage`, `Reply`, `TurnCommitted` |
| a subprocess | `SubprocessFinished` |

Notices of this process's own commits are skipped (its hubs announced them already), and so
is every notice of a session nobody here watches: the work is one indexed read per commit a
client here watches, done in the listener's thread; the event loop only queues the encoded
events (`loop.call_soon_threadsafe`). Nothing runs on the path of a turn.

Not carried across, said plainly: `CycleStarted` and `LoopStatus` (a worker's loop state is
not a commit), and `TriggerFired` (the spontaneous turn's commit does not say which trigger).
A session held open here with `SOUL_RUNNER=dbos` reads the worker's mood and impulses from
the store before its next turn, not on each notice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from soul.runtime import (
    CycleFinished,
    ImpulseQueued,
    MoodChanged,
    Reply,
    SubprocessFinished,
    TurnCommitted,
)
from soul.serve import wire
from soul.store import ORIGIN, Listener, Notice, SessionStore, StoredCommit, channel

log = logging.getLogger(__name__)


def events_of(commit: StoredCommit) -> list[Any]:
    """The events a commit stands for, as the process that made it announced them."""
    if commit.kind == "cycle":
        process, cycle = commit.process or "", commit.cycle or 0
        if not commit.steps and commit.mood is None and not commit.messages:
            return []  # a commit of summaries only
        out: list[Any] = [CycleFinished(process, cycle, commit.steps)]
        if commit.mood is not None:
            out.append(MoodChanged(process, cycle, commit.mood[0], commit.mood[1]))
        for m in commit.messages:
            if m.tag == "S_loud" and m.content.strip():
                out.append(ImpulseQueued(process, cycle, m.content.strip(), m.meta.get("trigger") is True,
                                         commit.pending_impulses))
        return out
    if commit.kind == "subprocess":
        return [SubprocessFinished(commit.process or "subprocess", True)]
    out = []
    if commit.kind == "message":
        out += [wire.user_message(m.content) for m in commit.messages if m.tag == "user"]
    reply = "".join(m.content for m in commit.messages if m.layer == "external" and m.tag != "user")
    if reply or commit.kind == "message":
        out.append(Reply(reply, commit.kind == "spontaneous"))
    out.append(TurnCommitted(commit.session_id, commit.turn))
    return out


class Relay:
    """Forwards other processes' commits of open sessions to their hubs (see module doc)."""

    def __init__(self, url: str, soul: str, hubs: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.url, self.hubs, self.loop = url, hubs, loop
        self._store: SessionStore | None = None  # the listener thread's own connection
        self.listener = Listener(url, channel(soul), self._heard)
        self.forwarded = 0

    def start(self) -> Relay:
        self.listener.start()
        return self

    def stop(self) -> None:
        self.listener.stop()
        if self._store is not None:
            self._store.close()
            self._store = None

    def _heard(self, notice: Notice | None) -> None:
        # In the listener's thread. None (a reconnect): a tab reloads what it missed on its
        # next Hello; nothing is replayed.
        if notice is None or notice.origin == ORIGIN or notice.session_id not in self.hubs.open:
            return
        if self._store is None:
            self._store = SessionStore.open(url=self.url)
        commit = self._store.stored_commit(notice.commit_id)
        if commit is None or commit.session_id != notice.session_id:
            return
        events = events_of(commit)
        if events:
            self.forwarded += 1
            self.loop.call_soon_threadsafe(self._publish, notice.session_id, events)

    def _publish(self, session_id: str, events: list[Any]) -> None:
        hub = self.hubs.open.get(session_id)
        if hub is not None:
            for event in events:
                hub.publish(event)


def start_relay(soul: Any, hubs: Any) -> Relay | None:
    """A running relay for `soul` when its store is PostgreSQL (None on SQLite: one process
    holds the sessions, and it announces their events itself)."""
    store = soul.store
    if store.backend != "postgresql":
        return None
    url = store.connection.url
    return Relay(url, soul.name, hubs, asyncio.get_running_loop()).start()
