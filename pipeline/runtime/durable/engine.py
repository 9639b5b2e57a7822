"""Background cycles as durable workflows on DBOS (`soul worker`): what survives a killed worker.

One DBOS workflow per cycle, its id built from (session, process, cycle number):
`soul-cycle:<session>:<process>:<n>`. The workflow has one step, `Background.run_cycle`, which
resumes the process's mind from the session store and runs cycle `n`, committing it with
`once=True`. So:

- a worker killed mid-cycle leaves the workflow PENDING in DBOS's tables; a surviving worker
  re-enqueues it once the dead one's heartbeat is stale (`recover`), or a worker restarted with
  the same executor id recovers it at launch; either runs the step again. If the
  killed run had already committed, the store holds cycle `n` and the re-run returns at once
  (no model call, no second commit); if it had not, the cycle runs now. Nothing is lost and
  nothing is applied twice.
- enqueuing a cycle whose workflow exists (a restarted scheduler, two schedulers) returns the
  existing workflow instead of starting another.

The queue (`soul-cycles`) is partitioned by session with one workflow at a time per partition,
so a soul's session never runs two cycles at once across all workers, and a rate limiter caps
how many cycles start per period across all workers — each cycle makes its process's model
calls, so this is the cap on model calls (`--rate CYCLES/SECONDS`).

DBOS is imported lazily (the `durable` extra): nothing here loads it until a worker launches.
DBOS keeps its own tables (schema `dbos`) in the database of `SOUL_STORE`.

A memory soul's work runs on the worker that owns its user's memory partition (docs/scale.md):
its cycles and spontaneous turns go to that worker's own queues (`soul-cycles@<executor>`,
`soul-turns@<executor>`, each worker listens to its own and the shared ones), and so do its
user turns, which `soul run` and `soul serve` send with `SOUL_RUNNER=dbos`
(`runtime/routing.py`; the workflow `soul.user_turn`, run by `runtime/durable/turns.py`).

Spontaneous turns run here too (`runtime/durable/triggers.py`): one workflow per trigger
firing, `soul-turn:<session>:<trigger>:<key>` on the queue `soul-turns` (partitioned by
session, one at a time), keyed by what it answers (the last pending impulse's commit, the
silence's last user message, the schedule's window), so it runs once however many schedulers
ask. A worker found dead by its heartbeat has its PENDING workflows re-enqueued by a survivor
(`recover`; `runtime/durable/recovery.py`). Events reach other processes through the store's
commit notices (`soul.store.notify`), not through DBOS.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from soul.errors import RunError
from soul.runtime import tracing
from soul.runtime.routing import (
    APPLICATION,
    CYCLE_QUEUE,
    TURN_QUEUE,
    USER_TURN,
    owner_queue,
    system_database_url,
)
from soul.store import mask_passwords

if TYPE_CHECKING:
    from collections.abc import Callable

    from soul.runtime.souls import Soul

QUEUE = CYCLE_QUEUE
WORKFLOW = "soul.cycle"
TURN_WORKFLOW = "soul.turn"
__all__ = ["QUEUE", "TURN_QUEUE", "Engine", "parse_rate", "system_database_url", "turn_workflow_id", "workflow_id"]

# The souls this process runs cycles for, by name: a recovered workflow names its soul and
# finds it here (DBOS re-runs workflows by registered function and arguments).
_SOULS: dict[str, Soul] = {}
_registered: dict[str, Any] = {}


def workflow_id(session_id: str, process: str, number: int, attempt: int = 1) -> str:
    """The workflow id of cycle `number` (a later `attempt` after a cycle's workflow failed)."""
    base = f"soul-cycle:{session_id}:{process}:{number}"
    return base if attempt <= 1 else f"{base}:retry{attempt}"


def turn_workflow_id(session_id: str, key: str) -> str:
    """The workflow id of the spontaneous turn a trigger firing `key` asks for."""
    return f"soul-turn:{session_id}:{key}"


def parse_rate(text: str) -> tuple[int, float]:
    """`CYCLES/SECONDS` (e.g. `600/60`) as (limit, period)."""
    try:
        limit, period = text.split("/", 1)
        out = int(limit), float(period)
    except ValueError:
        out = (0, 0.0)
    if out[0] < 1 or out[1] <= 0:
        raise RunError(f"--rate {text!r}: write CYCLES/SECONDS with both positive, e.g. 600/60")
    return out




def _dbos() -> Any:
    try:
        import dbos
    except ImportError as exc:
        raise RunError("durable background loops need DBOS: pip install 'soulgraph[durable]'") from exc
    return dbos


def _register() -> dict[str, Any]:
    """Define the cycle workflow once per process (DBOS wants it before launch)."""
    if _registered:
        return _registered
    DBOS = _dbos().DBOS

    @DBOS.step(name=WORKFLOW + ".run")
    async def cycle_step(soul: str, session_id: str, process: str, number: int) -> bool:
        return await _run_cycle(soul, session_id, process, number)

    @DBOS.workflow(name=WORKFLOW)
    async def cycle_workflow(soul: str, session_id: str, process: str, number: int) -> bool:
        return await cycle_step(soul, session_id, process, number)

    @DBOS.step(name=TURN_WORKFLOW + ".run")
    async def turn_step(soul: str, session_id: str, trigger: str, reason: str, since: int, due: float) -> bool:
        from soul.runtime.durable.triggers import run_spontaneous

        return await run_spontaneous(_soul(soul), session_id, trigger, reason, since, due)

    @DBOS.workflow(name=TURN_WORKFLOW)
    async def turn_workflow(soul: str, session_id: str, trigger: str, reason: str, since: int, due: float) -> bool:
        return await turn_step(soul, session_id, trigger, reason, since, due)

    @DBOS.step(name=USER_TURN + ".run")
    async def user_turn_step(soul: str, session_id: str, base: int, text: str) -> dict[str, Any]:
        from soul.runtime.durable.turns import run_user_turn

        return await run_user_turn(_soul(soul), session_id, base, text)

    @DBOS.workflow(name=USER_TURN)
    async def user_turn_workflow(soul: str, session_id: str, base: int, text: str) -> dict[str, Any]:
        return await user_turn_step(soul, session_id, base, text)

    _registered["workflow"] = cycle_workflow
    _registered["turn"] = turn_workflow
    _registered["user_turn"] = user_turn_workflow
    return _registered


def _soul(name: str) -> Soul:
    soul = _SOULS.get(name)
    if soul is None:
        raise RunError(f"this worker does not run soul {name!r}; start `soul worker {name}`")
    return soul


async def _run_cycle(soul_name: str, session_id: str, process: str, number: int) -> bool:
    import asyncio

    from soul.runtime.background import Background

    soul = _soul(soul_name)

    async def no_trigger(trigger: str, reason: str) -> None:
        return None  # the scheduler decides spontaneous turns from the store (durable_triggers)

    user = soul.store.session(session_id).user
    services = soul.services_for(user)  # a partitioned field: this user's partition
    memory = services.memory
    with memory.using() if memory is not None else nullcontext():
        if memory is not None and memory.leased:
            await asyncio.to_thread(memory.hold)  # LeaseHeld when another live worker owns it
        work = Background(soul.plan, services, soul.store, session_id, lambda event: None, no_trigger)
        ran = work.run_cycle(process, number)
        if tracing.on():  # the worker's span, the cycle's below it
            return await tracing.worker_cycle(ran, soul_name, session_id, process, number)
        return await ran


class Engine:
    """DBOS launched in this process for one soul: the cycle queue and its workflows."""

    def __init__(self, soul: Soul, store_url: str, *, executor: str = "local",
                 rate: tuple[int, float] | None = None, poll_seconds: float = 0.2) -> None:
        self.soul = soul
        self.url = system_database_url(store_url)
        self.executor, self.rate, self.poll_seconds = executor, rate, poll_seconds
        self.queue: Any = None
        self.owned: dict[str, Any] = {}  # this worker's own queues, by shared queue name

    def prepare(self) -> None:
        """Create DBOS's tables in the store's database (or bring them up to date) without
        launching it. A worker does this before it first beats: a process that sends turns
        enqueues them through DBOS's client, which creates no tables, as soon as it sees a
        live worker — on a fresh database, before that worker's launch had made them."""
        dbos = _dbos()
        quiet = logging.getLogger("dbos")
        quiet.disabled = True  # (as `launch`: a failure is one line)
        try:
            dbos.DBOS.migrate(self.url)
        except Exception as exc:
            raise self._could_not_start(exc) from exc
        finally:
            quiet.disabled = False

    def _could_not_start(self, exc: Exception) -> RunError:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return RunError(f"soul worker: DBOS could not start on the session store's database"
                        f" {mask_passwords(self.url)}: {mask_passwords(reason, self.url)}; check that the server runs and"
                        " the URL's user may create tables there")

    def launch(self) -> None:
        """Register the workflow and queue and launch DBOS; recovers this executor's
        unfinished cycles (a killed worker's) before returning."""
        dbos = _dbos()
        workflows = _register()
        _SOULS[self.soul.name] = self.soul
        config: dict[str, Any] = {
            "name": APPLICATION, "system_database_url": self.url, "executor_id": self.executor,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": self.poll_seconds,
        }
        quiet = logging.getLogger("dbos")
        quiet.disabled = True  # DBOS logs a failed launch as a traceback; ours is one line
        try:
            dbos.DBOS(config=config)  # type: ignore[arg-type]
            # the shared queues and this worker's own: another worker's own queue is not ours
            dbos.DBOS.listen_queues([QUEUE, TURN_QUEUE, *(owner_queue(q, self.executor) for q in (QUEUE, TURN_QUEUE))])
            dbos.DBOS.launch()  # recovery starts here; a recovered cycle's queue is registered next
        except Exception as exc:  # the database is unreachable or refuses: one line, no traceback
            dbos.DBOS.destroy()
            raise self._could_not_start(exc) from exc
        finally:
            quiet.disabled = False
        limiter = {"limit": self.rate[0], "period": self.rate[1]} if self.rate else None
        self.queue = dbos.DBOS.register_queue(
            QUEUE, partition_concurrency=1, limiter=limiter, polling_interval_sec=self.poll_seconds,
        )
        self.turns = dbos.DBOS.register_queue(
            TURN_QUEUE, partition_concurrency=1, polling_interval_sec=self.poll_seconds,
        )
        self.owned = {
            QUEUE: dbos.DBOS.register_queue(owner_queue(QUEUE, self.executor), partition_concurrency=1,
                                            limiter=limiter, polling_interval_sec=self.poll_seconds),
            TURN_QUEUE: dbos.DBOS.register_queue(owner_queue(TURN_QUEUE, self.executor), partition_concurrency=1,
                                                 polling_interval_sec=self.poll_seconds),
        }
        self._workflow = workflows["workflow"]
        self._turn = workflows["turn"]

    def enqueue(self, session_id: str, process: str, number: int, attempt: int = 1, owner: str | None = None) -> str:
        """Enqueue cycle `number` (once: if its workflow was enqueued before, nothing starts),
        on `owner`'s own queue when given (a memory soul's), else the shared one; its
        workflow id."""
        dbos = _dbos()
        wid = workflow_id(session_id, process, number, attempt)
        if owner is not None:
            dbos.DBOS.enqueue_workflow_with_options(
                self._options(QUEUE, owner, wid, session_id, WORKFLOW), self.soul.name, session_id, process, number)
            return wid
        with dbos.SetWorkflowID(wid), dbos.SetEnqueueOptions(queue_partition_key=session_id):
            self.queue.enqueue(self._workflow, self.soul.name, session_id, process, number)
        return wid

    def enqueue_turn(self, session_id: str, key: str, trigger: str, reason: str, since: int, due: float,
                     owner: str | None = None) -> str:
        """Enqueue the spontaneous turn of trigger firing `key` (once: an existing workflow
        with that id is returned), on `owner`'s own queue when given; its workflow id."""
        dbos = _dbos()
        wid = turn_workflow_id(session_id, key)
        if owner is not None:
            dbos.DBOS.enqueue_workflow_with_options(
                self._options(TURN_QUEUE, owner, wid, session_id, TURN_WORKFLOW),
                self.soul.name, session_id, trigger, reason, since, due)
            return wid
        with dbos.SetWorkflowID(wid), dbos.SetEnqueueOptions(queue_partition_key=session_id):
            self.turns.enqueue(self._turn, self.soul.name, session_id, trigger, reason, since, due)
        return wid

    def _options(self, queue: str, owner: str, wid: str, session_id: str, name: str) -> dict[str, Any]:
        """Enqueue options for another worker's (or this one's) own queue, by workflow name:
        that worker runs the same registered workflow (same code, same application version)."""
        return {"queue_name": owner_queue(queue, owner), "workflow_name": name, "workflow_id": wid,
                "queue_partition_key": session_id, "application_name": APPLICATION,
                "app_version": _dbos().DBOS.application_version}

    def statuses(self, workflow_ids: list[str]) -> dict[str, str]:
        """The status of each of these workflows, in one query per thousand (a missing id:
        not found)."""
        found: dict[str, str] = {}
        DBOS = _dbos().DBOS
        for i in range(0, len(workflow_ids), 1000):
            chunk = workflow_ids[i:i + 1000]
            for status in DBOS.list_workflows(workflow_ids=chunk, load_input=False, load_output=False):
                found[status.workflow_id] = str(status.status)
        return found

    def recover(self, executors: list[str], target: Callable[[str, str], str] | None = None) -> int:
        """Put the work of these (dead) executors back on queues as ENQUEUED, so one live
        worker's atomic dequeue runs each; how many were put back.

        Their PENDING workflows (running when they died) and the ENQUEUED ones waiting on
        their own queues (`soul-cycles@<dead>`, `soul-turns@<dead>`, which nobody else reads).
        A workflow on a shared queue goes back to it; one on a dead worker's own queue goes to
        `target(queue, workflow_id)` (the queue of its partition's next owner), else this
        worker's own.

        DBOS's public API, in two calls: `list_workflows(status=…, executor_id=… | queue_name=…)`
        (of this application version, as DBOS's own recovery picks them) and
        `resume_workflows(ids, queue_name=…)` per queue (without `queue_name` a workflow
        would go to DBOS's internal queue, which has no partition limit). `resume_workflows`
        sets ENQUEUED whatever executor holds a workflow, where DBOS's private recovery sets
        it only while the dead executor still holds it: so the ids are listed once more right
        before (still PENDING, still the dead executor's), which narrows the gap to one round
        trip. A workflow dequeued in that gap (its dead worker restarted at that moment and
        recovered it itself) would run twice at once; the store still applies it once (a
        cycle commits with `once=True`, a turn checks its base turn)."""
        if not executors:
            return 0
        DBOS = _dbos().DBOS
        version = DBOS.application_version
        theirs = [owner_queue(q, e) for e in executors for q in (QUEUE, TURN_QUEUE)]

        def listed(ids: list[str] | None = None) -> list[Any]:
            running = DBOS.list_workflows(workflow_ids=ids, status="PENDING", executor_id=list(executors),
                                          app_version=version, load_input=False, load_output=False)
            waiting = DBOS.list_workflows(workflow_ids=ids, status="ENQUEUED", queue_name=theirs,
                                          load_input=False, load_output=False)
            return [*running, *waiting]

        found = listed()
        if not found:
            return 0
        still = listed([w.workflow_id for w in found])
        by_queue: dict[str, list[str]] = {}
        for status in still:
            queue = status.queue_name or QUEUE
            if queue in theirs:
                base = queue.split("@", 1)[0]
                queue = target(base, status.workflow_id) if target is not None else owner_queue(base, self.executor)
            by_queue.setdefault(queue, []).append(status.workflow_id)
        for queue, ids in sorted(by_queue.items()):
            DBOS.resume_workflows(ids, queue_name=queue)
        return len({w.workflow_id for w in still})

    def shutdown(self) -> None:
        _SOULS.pop(self.soul.name, None)
        _dbos().DBOS.destroy()
