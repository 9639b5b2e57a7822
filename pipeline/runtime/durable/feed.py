"""Other processes' commits as a session's events (PostgreSQL only): how `soul run` and
`soul serve` hear what a `soul worker`, or another server, committed.

A `CommitFeed` LISTENs on a soul's commit channel (`soul.store.notify`). Each notice names a
session, a commit and the process that made it. A notice of this process's own commit (it
announced its events already), or of a session nobody here watches, is dropped at once. For
the others, the listener's thread reads the commit back through a store connection of its own
(`SessionStore.stored_commit`) and turns it into the events `Session.stream` and
`Session.subscribe` give in-process (`commit_events`):

| the commit | events |
|---|---|
| a cycle | `CycleFinished` (its steps' outputs), `MoodChanged` when it set a mood, `ImpulseQueued` when it queued an S_loud impulse |
| a turn (spontaneous, or another process's user turn) | `StepStarted` and `StepFinished` per step, `Reply` (spontaneous when no user asked; left out when a spontaneous turn said nothing), `TurnCommitted` |
| a subprocess | `SubprocessFinished` |

After a cycle or a turn of a session whose loops run in workers (`SOUL_RUNNER=dbos`), the
thread also re-reads that session's minds from the store, so its mood, cycle count and pending
impulses are the workers' (`read_minds`). Then, on the event loop it was given, the feed puts those
minds in place and hands a `Heard` to its callback: the event loop only swaps and queues;
the reading is the thread's, and nothing runs on the path of a turn.

`refresh_minds(session)` re-reads a worker-run session's minds synchronously: what a server does
when a client attaches, so its `Hello` shows the workers' mood and cycle, not the ones of the
session's last turn here.

Not carried, said plainly: `CycleStarted`, `LoopStatus` (a worker's loop state is not a
commit), `TriggerFired` (a spontaneous commit does not say which trigger) and a turn's streamed
`Token`s. Notices sent while the listener's connection was down are not replayed: the
callback gets no event for them (a reader reloads from the store).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soul.runtime.background import Mind
from soul.runtime.events import (
    CycleFinished,
    ImpulseQueued,
    MoodChanged,
    Reply,
    StepFinished,
    StepStarted,
    SubprocessFinished,
    TurnCommitted,
)
from soul.store import ORIGIN, Listener, Notice, SessionStore, StoredCommit, channel

if TYPE_CHECKING:
    from soul.runtime.session import Session

log = logging.getLogger(__name__)

Watched = Callable[[str], "Session | None"]  # session id -> the open session, None if unwatched


@dataclass(frozen=True)
class Heard:
    """A commit another process made to a watched session, as events."""

    session_id: str
    commit: StoredCommit
    events: tuple[Any, ...]
    minds: tuple[Mind, ...] = ()  # a worker-run session's, re-read after the commit; in place once delivered

    @property
    def user_texts(self) -> tuple[str, ...]:
        """The user's words of a user turn (a server announces them as `UserMessage`)."""
        if self.commit.kind != "message":
            return ()
        return tuple(m.content for m in self.commit.messages if m.tag == "user")


def commit_events(commit: StoredCommit) -> list[Any]:
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
    for step, (kind, status) in commit.kinds.items():
        if status in ("skipped", "gated"):
            continue
        out += [StepStarted(step, kind), StepFinished(step, commit.steps.get(step, {}), status != "failed")]
    reply = "".join(m.content for m in commit.messages if m.layer == "external" and m.tag != "user")
    if reply or commit.kind == "message":
        out.append(Reply(reply, commit.kind == "spontaneous"))
    out.append(TurnCommitted(commit.session_id, commit.turn))
    return out


def read_minds(store: SessionStore, session: Session) -> tuple[Mind, ...]:
    """Each background process's mind of a worker-run session as the store holds it now
    (read through `store`, which may be another connection than the session's)."""
    work = session.work
    if work is None:
        return ()
    minds = []
    for name, proc in list(work.processes.items()):
        mind = Mind(name, history=proc.mind.history)  # a fresh one: restoring twice appends twice
        mind.restore(store.mind_history(session.id, name))
        minds.append(mind)
    return tuple(minds)


def install_minds(session: Session, minds: tuple[Mind, ...]) -> None:
    """Put minds read by `read_minds` in place (on the session's event loop)."""
    work = session.work
    if work is None:
        return
    for mind in minds:
        proc = work.processes.get(mind.process)
        if proc is not None:
            proc.mind = mind


def refresh_minds(session: Any) -> bool:
    """Re-read a worker-run session's minds from its store (its mood, cycle and pending
    impulses as the workers left them); True when it did, False for loops run here."""
    if not session.loops_in_workers:
        return False
    install_minds(session, read_minds(session.store, session))
    return True


class CommitFeed:
    """Other processes' commits of watched sessions, delivered as `Heard` on an event loop
    (see the module's docstring)."""

    def __init__(self, url: str, soul: str, watched: Watched, deliver: Callable[[Heard], None],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.url, self.watched, self.deliver, self.loop = url, watched, deliver, loop
        self._store: SessionStore | None = None  # the listener thread's own connection
        self.listener = Listener(url, channel(soul), self.heard)
        self.forwarded = 0

    def start(self) -> CommitFeed:
        self.listener.start()
        return self

    def wait_listening(self, timeout: float = 10.0) -> bool:
        """Wait until the LISTEN is in effect (True), or `timeout` seconds (False)."""
        return self.listener.wait_listening(timeout)

    def stop(self) -> None:
        self.listener.stop()
        if self._store is not None:
            self._store.close()
            self._store = None

    def heard(self, notice: Notice | None) -> None:
        """The listener's callback, in its thread. None (a reconnect): nothing is replayed;
        a reader reloads what it missed from the store."""
        if notice is None or notice.origin == ORIGIN:
            return
        session = self.watched(notice.session_id)
        if session is None:
            return
        if self._store is None:
            self._store = SessionStore.open(url=self.url)
        commit = self._store.stored_commit(notice.commit_id)
        if commit is None or commit.session_id != notice.session_id:
            return
        if commit.kind == "message" and session.sent_here(commit.turn):
            return  # a turn this process sent to a worker: it announces the turn's events itself
        events = commit_events(commit)
        # a cycle sets the mood and queues impulses; a turn takes them: the minds as they are now
        fresh = commit.kind != "subprocess" and session.loops_in_workers
        minds = read_minds(self._store, session) if fresh else ()
        if events or minds:
            self.forwarded += 1
            self.loop.call_soon_threadsafe(self._arrive, Heard(notice.session_id, commit, tuple(events), minds))

    def _arrive(self, heard: Heard) -> None:
        session = self.watched(heard.session_id)
        if session is None:
            return  # closed meanwhile
        if heard.minds:
            install_minds(session, heard.minds)
        try:
            self.deliver(heard)
        except Exception:  # a reader's bug must not stop the feed
            log.exception("session %s: delivering another process's commit failed", heard.session_id)


def feed_for(store: SessionStore, soul: str, watched: Watched, deliver: Callable[[Heard], None],
             loop: asyncio.AbstractEventLoop) -> CommitFeed | None:
    """A started feed of `soul`'s commits when `store` is PostgreSQL; None on SQLite (one
    process holds a session there, and it announces its events itself)."""
    if store.backend != "postgresql":
        return None
    return CommitFeed(store.connection.url, soul, watched, deliver, loop).start()
