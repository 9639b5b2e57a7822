"""Triggers: turns nobody asked for.

- `s_loud` (AgentCSD): each S_loud impulse the subconscious writes is queued; a spontaneous
  turn runs `batch_seconds` (5) after the first queued one, at once when the cycle set
  `trigger`, or when `batch_max` (5) are queued. A user message drains pending impulses into
  its own prompt, which also cancels the wait. At most `unanswered_max` (1) spontaneous turns
  speak in a row: then the trigger waits for the user (the impulses queue for their message),
  so a soul speaks before being spoken to at most once, and then at most once per message.
- `idle`: after `idle_seconds` of user silence (once per silence; the next message re-arms it).
- `schedule`: every `interval_seconds`.

Firing calls the session's `fire(trigger, reason)`, which runs one spontaneous turn; turns of
a session never interleave (the session holds one lock per turn), so a trigger that fires
during a user turn waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Fire = Callable[[str, str], Awaitable[Any]]
UNANSWERED_MAX = 1  # an s_loud trigger's spontaneous replies before the user must speak again


@dataclass(frozen=True)
class TriggerSpec:
    """One trigger as the blueprint declares it."""

    name: str
    kind: str  # s_loud | idle | schedule
    source: str | None = None  # s_loud: process.step
    batch_seconds: float = 5.0
    batch_max: int = 5
    idle_seconds: float = 600.0
    interval_seconds: float = 86400.0
    unanswered_max: int = UNANSWERED_MAX  # s_loud: spontaneous replies in a row, none from the user

    @classmethod
    def of(cls, name: str, kind: str, options: dict[str, Any]) -> TriggerSpec:
        def number(key: str, default: float) -> float:
            value = options.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default

        return cls(
            name, kind, options.get("source") if isinstance(options.get("source"), str) else None,
            number("batch_seconds", 5.0), int(number("batch_max", 5)),
            number("idle_seconds", 600.0), number("interval_seconds", 86400.0),
            int(number("unanswered_max", UNANSWERED_MAX)),
        )

    @property
    def process(self) -> str | None:
        return self.source.partition(".")[0] if self.source else None

    @classmethod
    def all_of(cls, blueprint: Any) -> dict[str, TriggerSpec]:
        """Every trigger `blueprint` declares, by name (in-process and in `soul worker`)."""
        return {n: cls.of(n, t.kind, t.options) for n, t in blueprint.triggers.items()}


S_LOUD_REASONS = frozenset({"trigger", "batch_max", "batch_seconds"})
"""Why an s_loud trigger fires: it always has impulses to say when it fires, and a turn that
finds none (a user message drained them while it waited) has nothing to say."""


class Triggers:
    """A session's triggers, armed while its background work runs."""

    def __init__(self, specs: list[TriggerSpec], fire: Fire) -> None:
        self.specs = specs
        self._fire = fire
        self._batch: dict[str, asyncio.Task[None]] = {}  # s_loud trigger -> its batch timer
        self._timers: list[asyncio.Task[None]] = []  # idle and schedule
        self._idle: dict[str, asyncio.Task[None]] = {}
        self._firing: set[asyncio.Task[Any]] = set()
        self._unanswered: dict[str, int] = {}  # s_loud trigger -> its replies since the user spoke
        self._speaking: dict[str, int] = {}  # s_loud trigger -> its spontaneous turns running
        self.started = False

    def start(self) -> None:
        self.started = True
        for spec in self.specs:
            if spec.kind == "schedule":
                self._timers.append(asyncio.get_running_loop().create_task(self._every(spec)))
            elif spec.kind == "idle":
                self._arm_idle(spec)

    def impulse(self, process: str, trigger: bool, pending: int) -> None:
        """An impulse of `process` was queued; `pending` are waiting now."""
        for spec in self.specs:
            if spec.kind != "s_loud" or (spec.process and spec.process != process):
                continue
            if not self._may_speak(spec):
                continue  # it spoke unanswered enough: the impulses wait for the user's message
            if trigger:
                self._now(spec, "trigger")
            elif pending >= spec.batch_max:
                self._now(spec, "batch_max")
            elif spec.name not in self._batch:
                self._batch[spec.name] = asyncio.get_running_loop().create_task(self._after(spec))

    def user_spoke(self) -> None:
        """A user message: it drains the impulses (no batch to wait for), answers what the
        soul said unprompted, and re-arms idle."""
        for task in self._batch.values():
            task.cancel()
        self._batch.clear()
        self._unanswered.clear()
        for spec in self.specs:
            if spec.kind == "idle" and self.started:
                self._arm_idle(spec)

    def _may_speak(self, spec: TriggerSpec) -> bool:
        """Whether an s_loud trigger may start another spontaneous turn: fewer than
        `unanswered_max` have spoken (or run now) since the user last spoke."""
        return self._unanswered.get(spec.name, 0) + self._speaking.get(spec.name, 0) < spec.unanswered_max

    def _now(self, spec: TriggerSpec, reason: str) -> None:
        timer = self._batch.pop(spec.name, None)  # a batch timer that fires has left already
        if timer is not None:
            timer.cancel()
        if spec.kind == "s_loud":
            if not self._may_speak(spec):
                return
            self._speaking[spec.name] = self._speaking.get(spec.name, 0) + 1
        task = asyncio.get_running_loop().create_task(self._fire(spec.name, reason))
        self._firing.add(task)
        task.add_done_callback(lambda done: self._fired(spec, done))

    def _fired(self, spec: TriggerSpec, task: asyncio.Task[Any]) -> None:
        self._firing.discard(task)
        if spec.kind == "s_loud":
            self._speaking[spec.name] -= 1
        if task.cancelled():
            return
        if task.exception() is not None:
            log.warning("a spontaneous turn failed: %s", task.exception())
        elif spec.kind == "s_loud" and getattr(task.result(), "reply", None):
            self._unanswered[spec.name] = self._unanswered.get(spec.name, 0) + 1

    async def _after(self, spec: TriggerSpec) -> None:
        await asyncio.sleep(spec.batch_seconds)
        self._batch.pop(spec.name, None)
        self._now(spec, "batch_seconds")

    def _arm_idle(self, spec: TriggerSpec) -> None:
        old = self._idle.pop(spec.name, None)
        if old is not None:
            old.cancel()
        self._idle[spec.name] = asyncio.get_running_loop().create_task(self._silence(spec))

    async def _silence(self, spec: TriggerSpec) -> None:
        await asyncio.sleep(spec.idle_seconds)
        self._idle.pop(spec.name, None)
        self._now(spec, "idle")

    async def _every(self, spec: TriggerSpec) -> None:
        while True:
            await asyncio.sleep(spec.interval_seconds)
            self._now(spec, "schedule")

    @property
    def waiting(self) -> bool:
        """Whether a batch is waiting or a spontaneous turn is running."""
        return bool(self._batch or self._firing)

    async def settle(self) -> None:
        """Wait until no batch waits and no spontaneous turn runs (idle and schedule timers
        are not waited for: they never end)."""
        while self._batch or self._firing:
            await asyncio.gather(*self._batch.values(), *self._firing, return_exceptions=True)

    async def stop(self) -> None:
        self.started = False
        tasks = [*self._batch.values(), *self._timers, *self._idle.values(), *self._firing]
        for held in (self._batch, self._timers, self._idle, self._firing):
            held.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
