"""One broadcast hub per open session: every tab on a session sees the same events.

A `SessionHub` owns a `Session` while the server runs: it subscribes to the session's
background events (cycles, impulses, mood, triggers, spontaneous turns) and runs user turns
with `Session.turn(on_event=...)`, sending each event, encoded once, to every connected
client's queue. A turn runs as a task of the hub, not of the request or socket that asked
for it: a client that disconnects mid-turn loses nothing — the turn commits and the next
connection reads it from the store.

`Hubs` opens hubs on first use (starting the session's background work); the server's
`Keeper` (serve/idle.py) closes one nobody has used for its grace, and `Hubs` closes them all
when the server stops. A slow client whose queue fills is dropped (it reconnects and reloads
the session), so one stalled tab never holds the others or the turn back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from soul.errors import SoulError
from soul.serve import wire
from soul.serve.clock import LoopClock
from soul.serve.idle import Keeper
from soul.store import redact

log = logging.getLogger(__name__)

QUEUE_EVENTS = 10_000  # a client this far behind is dropped (it reloads on reconnect)
TurnJson = Callable[[Any, bool], dict[str, Any]]  # (TurnResult, with thoughts) -> the turn's JSON


class Client:
    """One connection's queue of encoded events, ended by `close()` (dropped as too slow, or
    the server stops); `closed` tells whether it was."""

    def __init__(self) -> None:
        # `broadcast` bounds it at QUEUE_EVENTS; None, put by `close`, ends the sending
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.closed = False

    def close(self) -> None:
        """Stop sending: what is still queued is thrown away (the page reloads the session
        when it reconnects) and the socket is closed with 1013, try again later."""
        if self.closed:
            return
        self.closed = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)


def broadcast(clients: set[Client], event: Any, what: str) -> None:
    """Queue `event` (a runtime event or a wire dict), encoded once, for every client in
    `clients`; a client too far behind is dropped from the set (`what` names it in the log)."""
    if not clients:
        return
    text = wire.encode_event(event)
    behind = []
    for client in clients:
        if client.queue.qsize() < QUEUE_EVENTS:
            client.queue.put_nowait(text)
        else:
            behind.append(client)
    for client in behind:
        log.warning("%s: a client fell %d events behind and was dropped", what, QUEUE_EVENTS)
        clients.discard(client)
        client.close()


async def send_queued(ws: Any, client: Client) -> None:
    """Send the client's queued events until it is closed (too slow, or the server stops)
    or goes away (the caller cancels this)."""
    queue = client.queue
    while True:
        text = await queue.get()  # no suspension while events are queued
        if text is None:
            await ws.close(1013)  # try again later: it reloads the session on reconnect
            return
        await ws.send_text(text)


class Audience:
    """The clients watching one thing (a session, a dialogue): each attaches a queue, and
    `broadcast` reaches them all. `busy` and `last_active` tell the server's `Keeper` when it
    was last used (a client came or went, work started or ended)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clients: set[Client] = set()
        self.clock = clock
        self.last_active = clock()

    def touch(self) -> None:
        self.last_active = self.clock()

    @property
    def working(self) -> bool:
        """Whether work runs that a client asked for (a turn, a run)."""
        return False

    @property
    def busy(self) -> bool:
        return bool(self.clients) or self.working

    def attach(self) -> Client:
        client = Client()
        self.clients.add(client)
        self.touch()
        return client

    def detach(self, client: Client) -> None:
        self.clients.discard(client)
        self.touch()


class TurnError(Exception):
    """A user turn failed: `message` is safe to show (redacted), `user_error` False for a bug."""

    def __init__(self, message: str, user_error: bool) -> None:
        super().__init__(message)
        self.message = message
        self.user_error = user_error


class SessionHub(Audience):
    """A session and the clients watching it."""

    def __init__(self, session: Any, turn_json: TurnJson, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.session = session
        self.turn_json = turn_json
        self.tasks: set[asyncio.Task[Any]] = set()
        self.paused = False  # its loops paused by a client (kept when the hub closes)
        self._unsubscribe = session.subscribe(self.publish)

    @property
    def working(self) -> bool:
        return bool(self.tasks)

    def steer(self, pause: bool) -> None:
        """Pause or resume the session's background loops (a client asked)."""
        self.paused = pause
        self.session.pause() if pause else self.session.resume()

    @property
    def id(self) -> str:
        return str(self.session.id)

    def publish(self, event: Any) -> None:
        """Send an event (a runtime event or a wire dict) to every client, encoded once."""
        broadcast(self.clients, event, f"session {self.id}")

    async def turn(self, text: str, thoughts: bool = False) -> dict[str, Any]:
        """Run a user turn to its commit, whatever happens to the caller; its JSON (with
        the quiet sections when `thoughts`)."""
        task = self.start_turn(text)
        result, everything = await asyncio.shield(task)  # the caller may go away; the turn does not
        return everything if thoughts else self.turn_json(result, False)

    def start_turn(self, text: str) -> asyncio.Task[tuple[Any, dict[str, Any]]]:
        """Start a user turn as the hub's own task (the socket's way: its clients see it
        through the events); the task gives (TurnResult, its JSON with the thoughts)."""
        clock = LoopClock()
        task = asyncio.create_task(clock.run(self._turn(text, clock)))
        self.tasks.add(task)
        self.touch()
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        self.touch()

    async def _turn(self, text: str, clock: LoopClock) -> tuple[Any, dict[str, Any]]:
        started = time.perf_counter()
        self.publish(wire.user_message(text))
        try:
            result = await self.session.turn(text, on_event=self.publish)
        except SoulError as exc:
            message = redact(str(exc))
            self.publish(wire.turn_failed(message))
            raise TurnError(message, True) from exc
        except Exception as exc:
            log.exception("session %s: a turn failed", self.id)
            message = f"internal error ({type(exc).__name__}); the server log has the details"
            self.publish(wire.turn_failed(message, "internal"))
            raise TurnError(message, False) from exc
        everything = self.turn_json(result, True)  # once: TurnDone carries it, `turn` may return it
        server_ms = (time.perf_counter() - started) * 1000  # all but encoding TurnDone itself
        trace = result.trace
        provider_ms = (trace.total_ms - trace.framework_ms) if trace is not None else 0.0
        self.publish(wire.turn_done(everything, server_ms, provider_ms, clock.loop_ms()))
        return result, everything

    async def close(self) -> None:
        """Stop the background work; let running turns reach their commit first."""
        self._unsubscribe()
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
        await self.session.close()
        for client in list(self.clients):
            client.close()
        self.clients.clear()


class Hubs:
    """The open sessions of one soul, by id, kept by the server's `Keeper` (serve/idle.py): a
    hub opens on first use and closes when nobody has used it for the keeper's grace."""

    def __init__(self, soul: Any, turn_json: TurnJson, cycles: int | None = None, keeper: Keeper | None = None) -> None:
        self.soul = soul
        self.turn_json = turn_json
        self.cycles = cycles
        self.keeper = keeper if keeper is not None else Keeper()
        self.open: dict[str, SessionHub] = {}
        self.paused: set[str] = set()  # sessions a client paused: they reopen paused
        self._opening: asyncio.Lock | None = None
        self.keeper.watch(self.open)

    async def get(self, session_id: str) -> SessionHub:
        """The hub of a stored session (an exact id), opened and started on first use
        (TooManyOpen when the server's bound is reached and every open hub is in use)."""
        hub = self.open.get(session_id)
        if hub is not None:
            return hub
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            hub = self.open.get(session_id)
            if hub is None:
                self.soul.store.session(session_id)  # SessionNotFound for an unknown id
                await self.keeper.make_room()
                hub = SessionHub(self.soul.session(session_id), self.turn_json, self.keeper.clock)
                await hub.session.start(cycles=self.cycles)
                if session_id in self.paused:
                    hub.steer(True)  # before its loops' first cycle: they start paused
                hub.touch()
                self.open[session_id] = hub  # after its start: the keeper never sees it half-open
            return hub

    def steer(self, hub: SessionHub, pause: bool) -> None:
        """A client pauses or resumes a session's loops; a paused session reopens paused."""
        hub.steer(pause)
        (self.paused.add if pause else self.paused.discard)(hub.id)

    def create(self, user: str) -> Any:
        """A new stored session (not opened until someone talks to it or watches it)."""
        return self.soul.session(user=user).info

    async def delete(self, session_id: str) -> None:
        hub = self.open.pop(session_id, None)
        if hub is not None:
            await hub.close()
        self.paused.discard(session_id)
        self.soul.store.delete_session(session_id)

    async def close(self) -> None:
        await self.keeper.close()
        hubs = list(self.open.values())
        self.open.clear()  # the same dict: the keeper watches it
        for hub in hubs:
            with contextlib.suppress(Exception):
                await hub.close()

