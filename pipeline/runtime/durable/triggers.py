"""Triggers in `soul worker`: spontaneous turns decided from the store, run as DBOS workflows.

With `SOUL_RUNNER=dbos` the process holding a session (`soul run`, `soul serve`) arms no
trigger: the worker's scheduler decides them from what the store says (`SessionStore.
trigger_marks`), so a spontaneous turn happens with no such process open. The rules are the
in-process ones (`runtime/background/triggers.py`), read from rows instead of timers:

| trigger | due | the firing's key (its workflow id's end) |
|---|---|---|
| `s_loud` | an impulse committed after the last turn (in the last 5 minutes, or 10 batches) has `trigger`, or `batch_max` are pending, or the first pending one is `batch_seconds` old — unless `unanswered_max` spontaneous turns spoke since the last user message | the last pending impulse's commit id |
| `idle` | `idle_seconds` after the last user message (after the session's creation when none), for another `idle_seconds` at most | that message's commit id |
| `schedule` | every `interval_seconds` from the session's creation | the window's number |

The key makes each firing one workflow (`soul-turn:<session>:<trigger>:<key>`), however many
schedulers ask for it. Its step (`run_spontaneous`) first checks the firing is still open —
no turn took the impulses since, no user spoke since the silence began, no spontaneous turn
ran in the window — so a step re-run after a crash, or a firing a user turn overtook, runs
nothing. The turn commits with the store's base-turn check: a user turn committed meanwhile
makes it `StaleTurn`, and the step reads again (the user turn usually answered it) rather than
interleave. A firing whose turn failed is not retried, as in-process (the log says so).

Left as it was, said plainly: `TriggerFired` is not announced to other processes (the
spontaneous turn's `Reply` and `TurnCommitted` are), and an impulse committed while a
spontaneous turn runs counts as taken by it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from soul.errors import StaleTurn
from soul.runtime.background import TriggerSpec

if TYPE_CHECKING:
    from soul.runtime.souls import Soul
    from soul.store import SessionMark, TriggerMarks

log = logging.getLogger(__name__)

ATTEMPTS = 3  # a spontaneous turn refused as stale is tried again this many times at most
# Impulses older than this (or 10 batches) fire nothing: an old session's unanswered impulses
# wait for its next user turn, as they do when an in-process session resumes.
STALE_IMPULSE_SECONDS = 300.0


class TurnQueue(Protocol):
    """Where firings go (`durable.Engine`)."""

    def enqueue_turn(self, session_id: str, key: str, trigger: str, reason: str, since: int, due: float,
                     owner: str | None = None) -> str: ...


@dataclass(frozen=True)
class Firing:
    """A trigger that is due: the workflow key, and what its step re-checks."""

    trigger: str
    reason: str  # trigger, batch_max, batch_seconds, idle, schedule
    key: str
    since: int  # s_loud: the last pending impulse's commit; idle: the last user message's
    due: float  # when it became due (idle, schedule: the step checks no spontaneous turn since)


def firing(spec: TriggerSpec, marks: TriggerMarks, created: float, now: float) -> Firing | None:
    """Whether `spec` is due for a session (a pure rule over the store's marks)."""
    if spec.kind == "s_loud":
        if marks.unanswered >= spec.unanswered_max:
            return None  # it spoke unprompted enough: the impulses wait for the user's message
        horizon = now - max(STALE_IMPULSE_SECONDS, 10 * spec.batch_seconds)
        pending = [i for i in marks.pending
                   if (spec.process is None or i.process == spec.process) and i.time >= horizon]
        if not pending:
            return None
        last = pending[-1].commit_id
        if any(i.trigger for i in pending):
            reason = "trigger"
        elif len(pending) >= spec.batch_max:
            reason = "batch_max"
        elif now >= pending[0].time + spec.batch_seconds:
            reason = "batch_seconds"
        else:
            return None
        return Firing(spec.name, reason, f"{spec.name}:{last}", last, now)
    if spec.kind == "idle":
        due = marks.last_message_time + spec.idle_seconds
        if now < due or marks.last_spontaneous_time >= due or now - due > spec.idle_seconds:
            return None  # not yet; answered; or a silence that ended long ago (an old session)
        since = marks.last_message_commit
        return Firing(spec.name, "idle", f"{spec.name}:idle{since}", since, due)
    if spec.kind == "schedule" and spec.interval_seconds > 0:
        window = int((now - created) // spec.interval_seconds)
        due = created + window * spec.interval_seconds
        if window < 1 or marks.last_spontaneous_time >= due:
            return None
        return Firing(spec.name, "schedule", f"{spec.name}:every{window}", 0, due)
    return None


def answered(spec: TriggerSpec, marks: TriggerMarks, since: int, due: float) -> bool:
    """Whether a firing was answered meanwhile (its step then runs nothing)."""
    if spec.kind == "s_loud":
        return marks.last_turn_commit > since
    if spec.kind == "idle":
        return marks.last_message_commit != since or marks.last_spontaneous_time >= due
    return marks.last_spontaneous_time >= due


async def run_spontaneous(soul: Soul, session_id: str, trigger: str, reason: str, since: int, due: float) -> bool:
    """The step of a firing: one spontaneous turn unless it was answered; True when one ran."""
    spec = TriggerSpec.all_of(soul.blueprint).get(trigger)
    if spec is None:
        log.warning("session %s: the soul has no trigger %r any more; nothing runs", session_id, trigger)
        return False
    for _ in range(ATTEMPTS):
        if answered(spec, soul.store.trigger_marks(session_id), since, due):
            return False
        session = soul.session(session_id, runner="dbos")  # no loops: just the turn
        try:
            await session.spontaneous()
            await session.settle()  # its subprocesses, if the soul has any
        except StaleTurn:
            continue  # a turn was committed meanwhile: read again
        finally:
            await session.close()
        return True
    log.warning("session %s: trigger %s (%s) stayed stale %d times; not fired", session_id, trigger, reason, ATTEMPTS)
    return False


@dataclass
class _Watched:
    updated: float = -1.0
    marks: TriggerMarks | None = None
    asked: dict[str, None] = field(default_factory=dict)  # firing keys enqueued, oldest first


@dataclass
class TriggerClock:
    """The scheduler's side: per session, the marks re-read when the session changed, and the
    firings enqueued when due."""

    soul: Soul
    engine: TurnQueue
    specs: dict[str, TriggerSpec] = field(default_factory=dict)
    fired: int = 0
    flying: set[str] = field(default_factory=set)  # turn workflows enqueued and not seen done
    _watched: dict[str, _Watched] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.specs = TriggerSpec.all_of(self.soul.blueprint)

    def tick(self, mark: SessionMark, now: float, owner: str | None = None) -> None:
        """Enqueue whatever trigger of this session is due (on `owner`'s own queue when given:
        a memory soul's partition owner)."""
        if not self.specs:
            return
        watched = self._watched.setdefault(mark.id, _Watched())
        if watched.marks is None or watched.updated != mark.updated:
            watched.marks = self.soul.store.trigger_marks(mark.id)
            watched.updated = mark.updated
        for spec in self.specs.values():
            due = firing(spec, watched.marks, mark.created, now)
            if due is None or due.key in watched.asked:
                continue
            self.flying.add(self.engine.enqueue_turn(mark.id, due.key, spec.name, due.reason, due.since, due.due, owner))
            watched.asked[due.key] = None
            if len(watched.asked) > 64:  # old keys never come back (ids and windows only grow)
                watched.asked = dict.fromkeys(list(watched.asked)[-32:])
            self.fired += 1

    def landed(self, statuses: dict[str, str], done: tuple[str, ...]) -> None:
        """Drop the turn workflows these statuses show finished."""
        self.flying = {w for w in self.flying if statuses.get(w, "UNKNOWN") not in done}

    def forget(self, session_ids: set[str]) -> None:
        """Sessions deleted: drop what was kept of them."""
        for sid in session_ids:
            self._watched.pop(sid, None)
