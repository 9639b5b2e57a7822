"""The scheduler of `soul worker`: which cycles and spontaneous turns are due, enqueued on DBOS
(`runtime/durable/engine.py`).

Every `poll` seconds the worker makes a fixed handful of queries, whatever the number of
sessions: the soul's sessions (id, turns, created, updated: one query), the status of every
workflow it has in flight (one query per thousand), and, only for sessions whose `updated`
moved, what their triggers and `after_turn` loops need. The cycle each (session, process) is
at comes from one grouped query when the session is first seen; after that the worker follows
its own workflows (a cycle's workflow that succeeded means the store holds that cycle). For
each (session, process) with no cycle of its own in flight it enqueues the next when due
(workflow id keyed by session, process and cycle number — so a restarted or second worker
enqueues the same id and gets the existing workflow):

- `continuous`: always due (the next cycle as soon as one ends).
- `interval`: `interval_seconds` after the last cycle's commit (read from the store when the
  session is first seen, then from this worker seeing its workflow end).
- `after_turn`: due when something changed since the last cycle (a turn was committed).

A cycle's workflow that failed (its model call kept failing) is retried as a new attempt of
the same cycle number after the process's backoff (`backoff_initial` → ×2 → `backoff_max`).
`cycles=N` stops enqueuing once the store holds N cycles of a process, and the worker returns
when every session has them, or has nothing to react to (`after_turn`), so scripted runs end.
Triggers are `runtime/durable/triggers.py`'s; heartbeats and taking over a dead worker's
workflows `runtime/durable/recovery.py`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soul.runtime.background import LoopSchedule, Mind
from soul.runtime.durable.engine import Engine
from soul.runtime.durable.recovery import Heartbeat
from soul.runtime.durable.triggers import TriggerClock

if TYPE_CHECKING:
    from soul.runtime.souls import Soul
    from soul.store import SessionMark, SessionStore

log = logging.getLogger(__name__)

DONE = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


@dataclass
class _Slot:
    """What the worker knows of one (session, process)."""

    number: int  # the next cycle to run
    wid: str | None = None  # its workflow, while in flight
    attempt: int = 1
    failures: int = 0
    not_before: float = 0.0  # interval and backoff: not enqueued before this time (wall clock)
    quiet: bool | None = None  # after_turn: nothing to react to (None: read it again)


@dataclass
class Worker:
    """Runs due cycles and spontaneous turns of one soul's sessions until stopped (or until
    `cycles` each are stored)."""

    soul: Soul
    engine: Engine
    store: SessionStore  # the scheduler's own connection (workflows use the soul's)
    poll: float = 0.5
    cycles: int | None = None
    heartbeat: Heartbeat | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    enqueued: int = 0
    _slots: dict[tuple[str, str], _Slot] = field(default_factory=dict)
    _seen: dict[str, SessionMark] = field(default_factory=dict)
    _triggers: TriggerClock | None = None

    def __post_init__(self) -> None:
        self._triggers = TriggerClock(self.soul, self.engine)
        declared = self.soul.blueprint.processes
        self._schedules = {n: (LoopSchedule.of(p.options, p.loop), p.options) for n, p in declared.items()}

    @property
    def fired(self) -> int:
        """Spontaneous turns this worker enqueued."""
        return self._triggers.fired if self._triggers is not None else 0

    def run(self) -> None:
        """Schedule until `stop()` (or, with `cycles`, until every session has them)."""
        while not self.stopping.is_set():
            if self.heartbeat is not None:
                self.heartbeat.tick()
            if self.tick() and self.cycles is not None:
                return
            self.stopping.wait(self.poll)

    def stop(self) -> None:
        self.stopping.set()

    def tick(self) -> bool:
        """One pass over the sessions; True when no session has a cycle left to run."""
        now = time.time()
        triggers = self._triggers
        # Statuses before sessions: a workflow seen done committed before the sessions are read.
        flying = [s.wid for s in self._slots.values() if s.wid is not None]
        flying += sorted(triggers.flying) if triggers is not None else []
        statuses = self.engine.statuses(flying) if flying else {}
        if triggers is not None:
            triggers.landed(statuses, DONE)
        marks = self.store.session_marks(self.soul.name)
        if any(m.id not in self._seen for m in marks) and self._schedules:
            self._first_seen({m.id for m in marks} - set(self._seen))
        gone = set(self._seen) - {m.id for m in marks}
        if gone:
            self._slots = {k: v for k, v in self._slots.items() if k[0] not in gone}
            if triggers is not None:
                triggers.forget(gone)
        finished = True
        for mark in marks:
            changed = self._seen.get(mark.id) != mark
            for name, (schedule, options) in self._schedules.items():
                if not self._schedule(mark, name, schedule, options, statuses, changed, now):
                    finished = False
            if triggers is not None:
                triggers.tick(mark, now)
        self._seen = {m.id: m for m in marks}
        # with `cycles`, a spontaneous turn enqueued is waited for too
        return finished and not (triggers is not None and triggers.flying)

    def _first_seen(self, new: set[str]) -> None:
        """Where each new session's processes are: their cycle count and last cycle's time."""
        counts = self.store.cycle_counts(self.soul.name, new)
        for sid in new:
            for name, (schedule, _) in self._schedules.items():
                done, last = counts.get((sid, name), (0, 0.0))
                slot = _Slot(done + 1)
                if schedule.loop == "interval" and done:
                    slot.not_before = last + schedule.interval_seconds
                self._slots[(sid, name)] = slot

    def _schedule(self, mark: SessionMark, process: str, schedule: LoopSchedule, options: dict[str, Any],
                  statuses: dict[str, str], changed: bool, now: float) -> bool:
        """Enqueue the next cycle of one process when due; True when it has none left."""
        slot = self._slots.setdefault((mark.id, process), _Slot(1))
        if slot.wid is not None:
            status = statuses.get(slot.wid, "UNKNOWN")
            if status not in DONE:
                return False
            slot.wid = None
            if status == "SUCCESS":  # the store holds cycle `number` now (run here, or before)
                slot.number += 1
                slot.failures, slot.attempt, slot.quiet = 0, 1, None
                if schedule.loop == "interval":
                    slot.not_before = now + schedule.interval_seconds
            else:
                slot.failures += 1
                slot.attempt += 1
                slot.not_before = now + schedule.backoff(slot.failures)
                log.warning("session %s: cycle %d of %s failed (%s); next attempt in %.1f s",
                            mark.id, slot.number, process, status, schedule.backoff(slot.failures))
        if self.cycles is not None and slot.number > self.cycles:
            return True
        if now < slot.not_before:
            return False
        if schedule.loop == "after_turn":
            if changed or slot.quiet is None:
                mind = Mind(process, history=int(options.get("history") or 20))
                mind.restore(self.store.mind_history(mark.id, process))
                slot.quiet = mind.begin_cycle().quiet
            if slot.quiet:
                return True  # nothing to react to: not due (and, for `cycles`, nothing left now)
        slot.wid = self.engine.enqueue(mark.id, process, slot.number, slot.attempt)
        self.enqueued += 1
        return False
