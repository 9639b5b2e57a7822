"""Events from other processes: commits a `soul worker` (or another `soul serve`) made reach the
WebSocket clients of this server (PostgreSQL only).

`Relay` is this server's `CommitFeed` (`soul.runtime.commit_feed`, shared with `soul run`):
it LISTENs on the soul's commit channel, and each commit another process made to a session
open here (a hub in `Hubs.open`) is read back in the listener's thread and published to the
hub's clients as the events `Session.stream` and `Session.subscribe` give in-process, a user
turn of another server preceded by its `UserMessage`. After a cycle of a session whose loops
run in workers, the session's minds are re-read too (in that thread), so the background panel
and the next `Hello` show the workers' mood and cycle; a client attaching re-reads them as well
(`refresh_minds`, before the WebSocket's `Hello`). The event loop only swaps the minds in and queues the
encoded events (`loop.call_soon_threadsafe`): nothing runs on the path of a turn.

Not carried across, said plainly: `CycleStarted`, `LoopStatus`, `TriggerFired` and a turn's
streamed `Token`s (see `soul.runtime.commit_feed`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from soul.runtime import CommitFeed, Heard
from soul.serve import wire
from soul.store import Notice

log = logging.getLogger(__name__)

class Relay:
    """Forwards other processes' commits of open sessions to their hubs (see module doc)."""

    def __init__(self, url: str, soul: str, hubs: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.hubs = hubs
        self.feed = CommitFeed(url, soul, self._watched, self._publish, loop)

    @property
    def forwarded(self) -> int:
        return int(self.feed.forwarded)

    def start(self) -> Relay:
        self.feed.start()
        return self

    def stop(self) -> None:
        self.feed.stop()

    def _heard(self, notice: Notice | None) -> None:
        self.feed.heard(notice)

    def _watched(self, session_id: str) -> Any:
        hub = self.hubs.open.get(session_id)  # read from the listener's thread: one dict lookup
        return hub.session if hub is not None else None

    def _publish(self, heard: Heard) -> None:
        hub = self.hubs.open.get(heard.session_id)
        if hub is None:
            return
        for text in heard.user_texts:
            hub.publish(wire.user_message(text))
        for event in heard.events:
            hub.publish(event)


def start_relay(soul: Any, hubs: Any) -> Relay | None:
    """A running relay for `soul` when its store is PostgreSQL (None on SQLite: one process
    holds the sessions, and it announces their events itself)."""
    store = soul.store
    if store.backend != "postgresql":
        return None
    return Relay(store.connection.url, soul.name, hubs, asyncio.get_running_loop()).start()
