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
when every session of the soul has them, or has nothing to react to (`after_turn`), so
scripted runs end.

**The split.** With a heartbeat, a worker reads only the sessions of its own shards
(`soul.store.shards`: each session's (soul, user) hashed into 1,024 shards, each shard given to
one live worker by rendezvous hashing), so no worker polls all of them, and a worker joining or
leaving moves only the shards it takes or gives up. The list of live workers is the heartbeat
table's, refreshed at each beat; a worker that has not seen a newcomer yet schedules a few
sessions it no longer owns for a beat, which enqueues nothing twice (workflow ids are keyed).
A memory soul's cycles and spontaneous turns go to the own queue of the worker holding the
partition's lease (sticky), or else this one's; each beat the worker gives up the idle
partitions the shards now give another worker (`Partitions.release`).
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
from soul.store import owner_of, shard_of, share

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
    _ring: tuple[str, ...] = ()  # the live workers the current share was worked out for
    shards: frozenset[int] | None = None  # this worker's shards (None: no heartbeat, all of them)
    moved: int = 0  # shards that came or went since the worker started (rebalancing)
    polled: int = 0  # sessions the last poll read
    _released_at: int = -1  # the heartbeat's beat count when partitions were last handed on

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

    def _split(self) -> frozenset[int] | None:
        """This worker's shards among the live workers the heartbeat last saw (worked out
        again only when they change), giving up the partitions it holds that are now
        another's."""
        beat = self.heartbeat
        if beat is None or not beat.live:
            return None
        me = self.engine.executor
        ring = tuple(sorted({*beat.live, me}))
        if ring != self._ring:
            mine = share(me, ring)
            if self.shards is not None:
                self.moved += len(mine ^ self.shards)
            self.shards, self._ring = mine, ring
        parts = self.soul.memory.partitions()
        if parts is not None and beat.beats != self._released_at:  # once a beat, not once a poll
            self._released_at = beat.beats
            parts.release(keep=lambda user: owner_of(shard_of(self.soul.name, user), ring) == me)
        return self.shards

    def _owners(self, marks: list[SessionMark], now: float) -> dict[str, str]:
        """A memory soul's sessions: the worker to run each one's work (by user): the
        partition's lease holder while it is live, else this one."""
        if self.soul.memory.partitions() is None:
            return {}
        live = set(self._ring) or {self.engine.executor}
        leases = self.store.leases(self.soul.name, {m.user for m in marks})
        return {user: lease.owner if lease.live(now) and lease.owner in live else self.engine.executor
                for user, lease in leases.items()}

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
        marks = self.store.session_marks(self.soul.name, self._split())
        self.polled = len(marks)
        owners = self._owners(marks, now)
        if any(m.id not in self._seen for m in marks) and self._schedules:
            self._first_seen({m.id for m in marks} - set(self._seen))
        gone = set(self._seen) - {m.id for m in marks}
        if gone:
            self._slots = {k: v for k, v in self._slots.items() if k[0] not in gone}
            if triggers is not None:
                triggers.forget(gone)
        finished = True
        partitioned = self.soul.memory.partitions() is not None
        for mark in marks:
            changed = self._seen.get(mark.id) != mark
            owner = owners.get(mark.user, self.engine.executor) if partitioned else None
            for name, (schedule, options) in self._schedules.items():
                if not self._schedule(mark, name, schedule, options, statuses, changed, now, owner):
                    finished = False
            if triggers is not None:
                triggers.tick(mark, now, owner)
        self._seen = {m.id: m for m in marks}
        # with `cycles`, a spontaneous turn enqueued is waited for too, and the other
        # workers' shards are done too (a worker that stops early would leave them unowned)
        done = finished and not (triggers is not None and triggers.flying)
        return done and (self.shards is None or self._all_done())

    def _all_done(self) -> bool:
        """With `cycles`: every session of the soul, in every worker's shards, has them."""
        if self.cycles is None:
            return True
        counts = self.store.cycle_counts(self.soul.name)
        for mark in self.store.session_marks(self.soul.name):
            for name, (schedule, _) in self._schedules.items():
                if schedule.loop != "after_turn" and counts.get((mark.id, name), (0, 0.0))[0] < self.cycles:
                    return False
        return True

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
                  statuses: dict[str, str], changed: bool, now: float, owner: str | None = None) -> bool:
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
        slot.wid = self.engine.enqueue(mark.id, process, slot.number, slot.attempt, owner)
        self.enqueued += 1
        return False
