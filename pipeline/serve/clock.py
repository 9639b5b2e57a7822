"""How long the event loop spent running one turn: its own cost on the server's one thread.

A turn's wall time on a busy server holds every other task the loop ran while the turn
awaited (its next streamed chunk, a socket); `server_ms - provider_ms` subtracts the model
call's whole wall time, so it also drops the turn's own handling of the streamed tokens.
`LoopClock` wraps the turn's coroutine and adds up the time spent inside each of its steps
(`send`/`throw`), which is exactly this turn's code: the framework, the store, the events it
encodes and queues for the clients, the provider's own Python. Not in it: the sockets' sends
(each client's pump task) and work handed to threads.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any


class LoopClock(Coroutine[Any, Any, Any]):
    """A coroutine that runs another one and times its steps: `loop_ms()` so far."""

    def __init__(self) -> None:
        self._coro: Coroutine[Any, Any, Any] | None = None
        self._busy = 0.0
        self._since: float | None = None  # the running step's start

    def run(self, coro: Coroutine[Any, Any, Any]) -> LoopClock:
        """Time `coro` (create the task with what this returns)."""
        self._coro = coro
        return self

    def loop_ms(self) -> float:
        """Milliseconds the loop has spent in the coroutine, the running step included."""
        running = time.perf_counter() - self._since if self._since is not None else 0.0
        return (self._busy + running) * 1000

    def send(self, value: Any) -> Any:
        assert self._coro is not None, "LoopClock.run(coro) first"
        self._since = time.perf_counter()
        try:
            return self._coro.send(value)
        finally:
            self._busy += time.perf_counter() - self._since
            self._since = None

    def throw(self, *exc: Any) -> Any:
        assert self._coro is not None, "LoopClock.run(coro) first"
        self._since = time.perf_counter()
        try:
            return self._coro.throw(*exc)
        finally:
            self._busy += time.perf_counter() - self._since
            self._since = None

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self

    def __iter__(self) -> Generator[Any, None, Any]:
        return self

    def __next__(self) -> Any:
        return self.send(None)
