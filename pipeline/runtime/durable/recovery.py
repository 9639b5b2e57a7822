"""A dead worker's in-flight workflows, taken over by a survivor with another executor id.

Each `soul worker` beats every `every` seconds: its row in the store's `soul_workers` table
(`SessionStore.beat`). A worker whose last beat is older than `dead_after` seconds is dead:
the first survivor to notice claims it (`SessionStore.take_over`, one claimant per death) and
asks DBOS to put its PENDING workflows back on their queues as ENQUEUED (`Engine.recover`:
DBOS's public `list_workflows` and `resume_workflows`) — at every beat while it holds the id,
since a worker claimed while only stalled may run more before it dies; the queue's atomic
dequeue then gives each to exactly one live worker. A recovered cycle re-runs its step:
a no-op if the dead worker had committed it (`once=True`), the cycle itself if not. A
recovered spontaneous turn re-checks that it is still open. So every cycle is applied once.

The beat also renews the leases of the memory partitions this worker has used within the lease
time (a partition idle longer lapses, for whichever worker the shards give it next), and
refreshes the list of live workers the scheduler splits the shards by. A dead worker's own
queues (`soul-turns@<dead>`, `soul-cycles@<dead>`) are emptied too: what waited there, and
what it was running, goes to the queue of the partition's next owner (`routing.route`); its
partitions' leases lapse as it is claimed (`SessionStore.take_over`), so that owner can take them.

How death is told, and its limits: a worker is "dead" when it has not beaten for `dead_after`
seconds (30 by default). A worker that is only stalled that long (a stopped VM, a network
partition longer than that) is taken over too; when it comes back, a cycle both ran commits
once (the store refuses the second), but its model call was made twice. Keep `dead_after` well
above the longest pause you expect. A worker restarted with its old id owns it again (its
beat clears `taken_by`, before its engine launches: `Heartbeat.claim`) and DBOS recovers what
is still pending under that id, as before.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from soul.runtime.routing import owner_queue, route, workflow_session

if TYPE_CHECKING:
    from soul.runtime.durable.engine import Engine
    from soul.store import SessionStore

log = logging.getLogger(__name__)


@dataclass
class Heartbeat:
    """Beats for one executor and takes over the dead ones (call `tick` from the scheduler)."""

    store: SessionStore
    engine: Engine
    executor: str
    soul: str
    dead_after: float = 30.0
    every: float = 0.0  # 0: a fifth of dead_after, at most 5 s
    taken: list[str] = field(default_factory=list)  # executors this worker took over
    recovered: int = 0  # workflows it re-enqueued for them
    live: list[str] = field(default_factory=list)  # the soul's live workers at the last beat
    beats: int = 0
    _last: float = 0.0

    def __post_init__(self) -> None:
        if self.every <= 0:
            self.every = min(5.0, self.dead_after / 5)

    def claim(self, now: float | None = None) -> None:
        """Beat once, now: the executor's id is its own again (a survivor's claim on it is
        cleared). Before the engine launches, so nothing runs under the id while it is marked
        taken."""
        self.store.beat(self.executor, self.soul, time.time() if now is None else now, dead_after=self.dead_after)

    def tick(self, now: float | None = None) -> list[str]:
        """Beat when it is time; the executors taken over by this call."""
        at = time.time() if now is None else now
        if at - self._last < self.every:
            return []
        self._last = at
        self.beats += 1
        self.claim(at)
        parts = self.engine.soul.memory.partitions()
        if parts is not None:
            parts.renew(at)
        dead = self.store.take_over(self.executor, at - self.dead_after)
        self.live = self.store.live_workers(self.soul, at)
        # Every id this worker holds is recovered at each beat, not only those claimed now: a
        # worker claimed while only stalled may run more under its id and then die before it
        # beats again (the beat would have made its id its own), and that work would be left
        # PENDING under an id no survivor claims twice. What is still PENDING under a held id
        # is nobody's; a workflow once recovered is run under its new executor's id.
        held = [b.executor for b in self.store.worker_beats() if b.taken_by == self.executor]
        found = self.engine.recover(held, self._target) if held else 0
        self.recovered += found
        if dead:
            self.taken += dead
            log.warning("executor %s took over %s (silent for over %.0f s): %d workflow(s) re-enqueued",
                        self.executor, ", ".join(dead), self.dead_after, found)
        elif found:
            log.warning("executor %s re-enqueued %d more workflow(s) of %s (run after it took them over)",
                        self.executor, found, ", ".join(held))
        return dead

    def _target(self, queue: str, workflow_id: str) -> str:
        """Where a dead worker's own-queue workflow goes: its partition's next owner's queue
        (this worker's, when that cannot be told)."""
        owner = None
        sid = workflow_session(workflow_id)
        if sid is not None:
            try:
                user = self.store.session(sid).user
                owner = route(self.store, self.soul, user, live=[w for w in self.live if w != self.executor] + [self.executor])
            except Exception:  # a deleted session: anyone may find out
                owner = None
        return owner_queue(queue, owner or self.executor)
