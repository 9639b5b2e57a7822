"""How long an open session or dialogue stays open on the server, and how many may be.

Opening a session's hub starts its background loops and triggers (a soul with `processes:`,
such as csd, calls its models on its own from then on); opening a dialogue loads its runner.
`Keeper` closes what nobody uses: a hub with no client attached and no work running (a user
turn, a dialogue's run) for `grace` seconds is closed, which stops its loops and triggers (the
next client opens it again, from the store). It also bounds how many are open at once,
sessions and dialogues together: opening one more past `limit` first closes the one idle the
longest (no client, no work), and when every open one is in use it is refused with
`TooManyOpen` (HTTP 503, or an `Error` event and a close on a socket).

A hub tells its keeper what it needs through three members: `busy` (a client is attached or
work runs), `last_active` (when a client came or went, or work started or ended, on the
keeper's clock) and `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, MutableMapping
from typing import Any

log = logging.getLogger(__name__)

IDLE_GRACE = 60.0  # seconds with no client and no work before a hub closes (`--idle-grace`)
MAX_OPEN = 500  # sessions and dialogues open at once (`--max-sessions`)


class TooManyOpen(Exception):
    """Every open session and dialogue is in use and the bound is reached: 503, saying so."""

    status = 503
    code = "too_many_sessions"

    def __init__(self, limit: int, grace: float) -> None:
        self.message = (
            f"this server has {limit} sessions and dialogues open, each watched or working (its limit, "
            f"soul serve --max-sessions); try again when one is left alone (it closes {grace:g} s after "
            "its last client leaves), or ask the server's owner to raise the limit"
        )
        super().__init__(self.message)
        self.retry_after = max(1, round(grace))


class Keeper:
    """The open hubs of one server (each registry a dict of id -> hub): idle ones closed after
    `grace` seconds, at most `limit` open (see the module doc)."""

    def __init__(self, grace: float = IDLE_GRACE, limit: int = MAX_OPEN,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self.limit = limit
        self.clock = clock
        self.closed = 0  # hubs closed for being idle (the tests read it)
        self._registries: list[MutableMapping[str, Any]] = []
        self._reaper: asyncio.Task[None] | None = None

    def watch(self, registry: MutableMapping[str, Any]) -> None:
        """Keep the hubs of `registry` (its owner adds and removes them; the keeper removes
        the ones it closes)."""
        self._registries.append(registry)

    @property
    def open_count(self) -> int:
        return sum(len(r) for r in self._registries)

    async def make_room(self) -> None:
        """Before one more hub opens: close the idlest while at the limit; TooManyOpen when
        every open hub is in use."""
        self._start()
        while self.open_count >= self.limit:
            idlest = min(((hub.last_active, id(hub), registry, key, hub) for registry in self._registries
                          for key, hub in registry.items() if not hub.busy), default=None)
            if idlest is None:
                raise TooManyOpen(self.limit, self.grace)
            _, _, registry, key, hub = idlest
            await self._close(registry, key, hub)

    def _start(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        every = min(max(self.grace / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(every)
            await self.reap()

    async def reap(self) -> None:
        """Close every hub idle for `grace` seconds or more."""
        now = self.clock()
        for registry in self._registries:
            for key, hub in list(registry.items()):
                if not hub.busy and now - hub.last_active >= self.grace:
                    await self._close(registry, key, hub)

    async def _close(self, registry: MutableMapping[str, Any], key: str, hub: Any) -> None:
        if registry.get(key) is not hub:  # closed or replaced meanwhile
            return
        del registry[key]
        self.closed += 1
        try:
            await hub.close()
        except Exception:  # one hub's failure to close must not stop the keeping
            log.exception("closing the idle %s failed", key)

    async def close(self) -> None:
        """Stop keeping (the server stops; its owners close what is still open)."""
        task, self._reaper = self._reaper, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
