"""Background loops behind a small runner interface: the session never knows which runs them.

A `processes:` entry (AgentCSD's subconscious) cycles beside the conversation: `continuous`
(the next cycle as soon as one ends — no sleep but the model's latency), `interval` (every
`interval_seconds`), or `after_turn` (one cycle after each committed turn). A failed cycle
backs off `initial_seconds` → ×2 → … → `max_seconds` (1 → 60 s by default) and the next
success resets it. `pause()` takes effect after the current cycle; `stop()` cancels the loop
(a cancelled cycle has committed nothing). `cycles` bounds the attempts, failed ones included,
so a scripted run ends by itself.

`LoopRunner` is the interface; `AsyncioRunner` runs the loop as a task of the session's event
loop. `runner_choice` reads who runs the loops (`SOUL_RUNNER`): in-process, or `dbos`, where
`soul worker` processes run each cycle as a durable workflow (`runtime/durable/engine.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from soul.errors import RunError

log = logging.getLogger(__name__)

LOOPS = ("continuous", "interval", "after_turn")
RUNNERS = ("asyncio", "dbos")  # SOUL_RUNNER: in-process, or `soul worker` (runtime/durable/engine.py)


@dataclass(frozen=True)
class LoopSchedule:
    """When a background process cycles, and how it backs off."""

    loop: str = "continuous"
    interval_seconds: float = 60.0
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    cycles: int | None = None  # at most this many attempts (None: until stopped)

    @classmethod
    def of(cls, options: dict[str, Any], loop: str, cycles: int | None = None) -> LoopSchedule:
        """The schedule a blueprint's process declares (`loop`, `interval_seconds`,
        `backoff: {initial_seconds, max_seconds}`)."""
        backoff = options.get("backoff") or {}
        return cls(
            loop if loop in LOOPS else "continuous",
            float(options.get("interval_seconds") or 60.0),
            float(backoff.get("initial_seconds") or 1.0),
            float(backoff.get("max_seconds") or 60.0),
            cycles,
        )

    def backoff(self, failures: int) -> float:
        """The pause after `failures` consecutive failed cycles."""
        return min(self.backoff_max, self.backoff_initial * 2 ** max(0, failures - 1))


Cycle = Callable[[], Awaitable[Any]]
OnStatus = Callable[[str], None]
OnError = Callable[[BaseException, float], None]


class LoopRunner(Protocol):
    """Runs one background loop: the only thing the session knows of how loops run."""

    status: str  # idle | running | paused | backing_off | done | stopped

    def start(self, cycle: Cycle, schedule: LoopSchedule, on_status: OnStatus, on_error: OnError) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def wake(self) -> None: ...

    async def stop(self) -> None: ...

    async def done(self) -> None: ...


def runner_choice(value: str | None = None) -> str:
    """Who runs background loops: `asyncio` (in-process, the default) or `dbos` (`soul worker`
    processes run them; a session's own process runs its turns; the workers fire its triggers). From
    `SOUL_RUNNER` unless `value` is given."""
    chosen = (value if value is not None else os.environ.get("SOUL_RUNNER", "")).strip().lower() or "asyncio"
    if chosen not in RUNNERS:
        raise RunError(f"SOUL_RUNNER={chosen!r} is not a runner: use 'asyncio' (in-process, the default)"
                       " or 'dbos' (background loops run by `soul worker`)")
    return chosen


class AsyncioRunner:
    """A `LoopRunner` on the running asyncio loop (in-process)."""

    def __init__(self) -> None:
        self.status = "idle"
        self.attempts = 0
        self.failures = 0
        self._task: asyncio.Task[None] | None = None
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._woken = asyncio.Event()
        self._on_status: OnStatus = lambda status: None

    def _set(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self._on_status(status)

    def start(self, cycle: Cycle, schedule: LoopSchedule, on_status: OnStatus, on_error: OnError) -> None:
        if self._task is not None:
            return
        self._on_status = on_status
        self._task = asyncio.get_running_loop().create_task(self._loop(cycle, schedule, on_error))

    def pause(self) -> None:
        """Pause after the current cycle."""
        self._resumed.clear()
        if self.status in ("running", "idle", "backing_off"):
            self._set("paused")

    def resume(self) -> None:
        self._resumed.set()
        if self.status == "paused":
            self._set("running")

    def wake(self) -> None:
        """A turn was committed (an `after_turn` loop cycles once)."""
        self._woken.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.status != "done":
            self._set("stopped")

    async def done(self) -> None:
        """Wait until a bounded loop has made its attempts (returns at once if never started)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    async def _loop(self, cycle: Cycle, schedule: LoopSchedule, on_error: OnError) -> None:
        self._set("running" if self._resumed.is_set() else "paused")
        while schedule.cycles is None or self.attempts < schedule.cycles:
            if not self._resumed.is_set():
                self._set("paused")
                await self._resumed.wait()
                self._set("running")
            if schedule.loop == "after_turn":
                await self._woken.wait()
                self._woken.clear()
            self.attempts += 1
            try:
                await cycle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a cycle's failure is data: back off, try again
                self.failures += 1
                delay = schedule.backoff(self.failures)
                log.warning("background cycle failed (%s); next attempt in %.1f s", exc, delay)
                on_error(exc, delay)
                if schedule.cycles is not None and self.attempts >= schedule.cycles:
                    break
                self._set("backing_off")
                await asyncio.sleep(delay)
                self._set("running" if self._resumed.is_set() else "paused")
                continue
            self.failures = 0
            if schedule.loop == "interval":
                await asyncio.sleep(schedule.interval_seconds)
            else:
                # continuous: the next cycle at once, as the seed (even with nothing new: the
                # subconscious keeps thinking); yield first so turns and triggers get their turn
                await asyncio.sleep(0)
        self._set("done")
