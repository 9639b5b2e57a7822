"""The scheduler of `soul worker`: which cycles are due, enqueued on DBOS (`runtime/durable.py`).

Every `poll` seconds the worker reads the soul's sessions from the store and, for each session
and background process with no cycle of its own in flight, decides whether the next cycle is
due and enqueues it (workflow id keyed by session, process and the cycle number the store says
comes next — so a restarted worker enqueues the same id and gets the existing workflow):

- `continuous`: always due (the next cycle as soon as one ends).
- `interval`: due `interval_seconds` after this worker saw the previous cycle end (a worker
  that just started runs one at once: it does not know when a predecessor's last cycle ended).
- `after_turn`: due when something changed since the last cycle (a turn was committed).

A cycle's workflow that failed (its model call kept failing) is retried as a new attempt of
the same cycle number after the process's backoff (`backoff_initial` → ×2 → `backoff_max`).
`cycles=N` stops enqueuing once the store holds N cycles of a process, and the worker returns
when every session has them, or has nothing to react to (`after_turn`), so scripted runs end.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soul.runtime.durable import Engine
from soul.runtime.mind import Mind
from soul.runtime.processes import LoopSchedule

if TYPE_CHECKING:
    from soul.runtime.souls import Soul
    from soul.store import SessionStore

log = logging.getLogger(__name__)

DONE = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


@dataclass
class _Slot:
    """What the worker knows of one (session, process)."""

    handle: Any = None
    number: int = 0
    attempt: int = 1
    failures: int = 0
    not_before: float = 0.0  # interval and backoff: not enqueued before this time


@dataclass
class Worker:
    """Runs due cycles of one soul's sessions until stopped (or `cycles` each are stored)."""

    soul: Soul
    engine: Engine
    store: SessionStore  # the scheduler's own connection (workflows use the soul's)
    poll: float = 0.5
    cycles: int | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    enqueued: int = 0
    _slots: dict[tuple[str, str], _Slot] = field(default_factory=dict)

    def run(self) -> None:
        """Schedule until `stop()` (or, with `cycles`, until every session has them)."""
        while not self.stopping.is_set():
            if self.tick() and self.cycles is not None:
                return
            self.stopping.wait(self.poll)

    def stop(self) -> None:
        self.stopping.set()

    def tick(self) -> bool:
        """One pass over the sessions; True when no session has a cycle left to run."""
        finished = True
        blueprint = self.soul.blueprint
        for info in self.store.sessions(self.soul.name):
            for name, declared in blueprint.processes.items():
                schedule = LoopSchedule.of(declared.options, declared.loop)
                if not self._schedule(info.id, name, schedule, declared.options):
                    finished = False
        return finished

    def _schedule(self, session_id: str, process: str, schedule: LoopSchedule, options: dict[str, Any]) -> bool:
        """Enqueue the next cycle of one process when due; True when it has none left."""
        slot = self._slots.setdefault((session_id, process), _Slot())
        now = time.monotonic()
        if slot.handle is not None:
            status = self.engine.status(slot.handle)
            if status not in DONE:
                return False
            slot.handle = None
            if status == "SUCCESS":
                slot.failures, slot.attempt = 0, 1
                if schedule.loop == "interval":
                    slot.not_before = now + schedule.interval_seconds
            else:
                slot.failures += 1
                slot.attempt += 1
                slot.not_before = now + schedule.backoff(slot.failures)
                log.warning("session %s: cycle %d of %s failed (%s); next attempt in %.1f s",
                            session_id, slot.number, process, status, schedule.backoff(slot.failures))
        history = self.store.mind_history(session_id, process)
        number = int(history.cycles) + 1
        if self.cycles is not None and number > self.cycles:
            return True
        if now < slot.not_before:
            return False
        if schedule.loop == "after_turn":
            mind = Mind(process, history=int(options.get("history") or 20))
            mind.restore(history)
            if mind.begin_cycle().quiet:
                return True  # nothing to react to: not due (and, for `cycles`, nothing left now)
        if number != slot.number:
            slot.number, slot.attempt = number, 1
        while True:
            handle = self.engine.enqueue(session_id, process, number, slot.attempt)
            if self.engine.status(handle) not in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                break
            slot.attempt += 1  # a failed attempt from before a restart: the next one
        slot.handle = handle
        self.enqueued += 1
        return False
