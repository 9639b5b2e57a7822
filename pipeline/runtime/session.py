"""Session: one conversation with one user — turns, streaming, and after-turn subprocesses.

`await session.turn(text)` runs a turn and commits it; `session.turn_sync(text)` does the same
from synchronous code (and waits for subprocesses); `async for event in session.stream(text)`
yields StepStarted / Token / StepFinished / Reply / TurnCommitted as they happen. Subprocesses
run after the reply is delivered and are cancelled by the next input (Open Souls semantics):
a cancelled subprocess writes nothing.

A session runs its turns from the soul's plan and services (`runtime/turn/services.py`) and commits
them through the session store; it knows nothing of the `Soul` that opened it. Given a
`TurnSender` (a memory soul on PostgreSQL, `SOUL_RUNNER=dbos`), its user turns run on the worker
owning the user's memory partition instead (`runtime/routing.py`, docs/scale.md).

Text policy: a message holding lone surrogates (invalid UTF-8 read with `surrogateescape`, a
stray `\ud83d`) is not refused: each lone surrogate becomes U+FFFD before the turn starts, so
what is shown, prompted and stored is the same encodable text. Model replies get the same.
A turn that is cancelled or interrupted (Ctrl-C) before its commit stores nothing.

Background work (AgentCSD): `await session.start()` starts the blueprint's `processes:` loops
and `triggers:` (`runtime/background/cycles.py`); their events, and the events of the spontaneous
turns triggers start, go to `subscribe()`d listeners. Turns of one session never interleave:
a spontaneous turn waits for a user turn and the other way round. A turn drains the pending
S_loud impulses into its prompt and reads the mood & criteria as they were when it started;
`pause()` / `resume()` act after the current cycle; `close()` stops it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from soul.compiler import Plan
from soul.records import Fence, SessionInfo
from soul.runtime import tracing
from soul.runtime.background import S_LOUD_REASONS, Background, Mind, observed_in
from soul.runtime.bridges import Kept, RecallUse, recall_use, recalls_input, write_turn
from soul.runtime.events import (
    Reply,
    SubprocessFinished,
    Trace,
    TriggerFired,
    TurnCommitted,
    TurnResult,
)
from soul.runtime.surrogates import replace_lone_surrogates
from soul.runtime.turn import (
    HeldEvents,
    ScopeRunner,
    Services,
    TurnState,
    build_commit,
    busy_seconds,
    gate_config,
    gate_reply,
    memory_items,
    reply_of,
    start_turn,
)

if TYPE_CHECKING:
    from soul.runtime.routing import TurnSender
    from soul.store import SessionStore

log = logging.getLogger(__name__)


class Session:
    """A stored conversation; create with `Soul.session()`."""

    def __init__(self, plan: Plan, services: Services, store: SessionStore, info: SessionInfo,
                 runner: str | None = None, turns: TurnSender | None = None) -> None:
        self.plan = plan
        self.turns_sent = turns  # a memory soul's turns run on the worker owning the partition
        self.services = services
        self.store = store  # where the session lives: snapshots, commits, traces
        self.info = info
        self._order = tuple(plan.turn.steps)  # plan order: the order changes are committed in
        self._kept: Kept | None = None  # Chetana's controller as the last turn left it (`Cognition.keep`)
        self._warms = recalls_input(plan)  # a recall searches for the input: its vector is warmed at the start
        self._gate = gate_config(plan.blueprint.observer)  # the observer's gate on a message's reply (None: none)
        self._background: asyncio.Task[None] | None = None
        self._writing: Future[None] | None = None  # the last turn's memories, written after it returned
        self._listeners: list[Callable[[Any], None]] = []
        self._lock: asyncio.Lock | None = None  # one turn at a time (made on the running loop)
        self.work: Background | None = None
        if plan.processes or plan.blueprint.triggers:
            # runner: 'asyncio' or 'dbos' (`soul worker` runs the loops); None: $SOUL_RUNNER
            self.work = Background(plan, services, store, info.id, self._broadcast, self._fire, runner)
            self.work.restore()  # a resumed session's minds, histories and Persona Cores

    # -- background work (processes and triggers) ---------------------------------------------

    @property
    def mind(self) -> Mind | None:
        """What the turns share with the background process (None without one)."""
        return self.work.mind if self.work is not None else None

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Send every background event (cycles, impulses, mood, triggers) and every event of
        spontaneous turns to `listener`; returns the function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _broadcast(self, event: Any) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a listener's bug must not stop the loop that feeds it
                log.exception("session %s: an event listener failed on %s", self.id, type(event).__name__)

    async def start(self, *, cycles: int | None = None) -> None:
        """Start the background processes and triggers; `cycles` bounds each loop's attempts
        (a scripted run then ends by itself). Nothing happens for a soul without them."""
        if self.work is not None:
            self.work.start(cycles)

    def pause(self) -> None:
        """Pause the background processes after their current cycle."""
        if self.work is not None:
            self.work.pause()

    def resume(self) -> None:
        if self.work is not None:
            self.work.resume()

    async def idle(self) -> None:
        """Wait until bounded loops have made their cycles, no impulse batch is waiting and no
        spontaneous turn runs (then the subprocesses of the last turn)."""
        if self.work is not None:
            await self.work.done()
        await self.settle()

    async def close(self) -> None:
        """Stop the background work and cancel what still runs; the MCP servers the session
        held alone (lifetime `session`) stop."""
        if self.work is not None:
            await self.work.stop()
        await self._cancel_background()
        await self._written()  # a closed session's memories are in its field
        self._kept = None  # Chetana's controller: a closed session's next turn restores it
        if self.services.tools is not None:
            self.services.tools.release(self.id)

    async def __aenter__(self) -> Session:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _fire(self, trigger: str, reason: str) -> TurnResult | None:
        """A trigger fired: one spontaneous turn with the impulses pending now."""
        async with self._turn_lock():
            mind = self.mind
            impulses = mind.drain_impulses() if mind is not None else ()
            if not impulses and reason in S_LOUD_REASONS:
                return None  # a user turn took the impulses while this waited: nothing left to say
            self._broadcast(TriggerFired(trigger, reason, impulses))
            return await self._run_locked("", "spontaneous", self._broadcast, impulses)

    def _turn_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    @property
    def loops_in_workers(self) -> bool:
        """Whether `soul worker` processes run this session's background loops
        (`SOUL_RUNNER=dbos`, or `runner="dbos"`), not this process."""
        return self.work is not None and self.work.delegated

    def sent_here(self, turn: int) -> bool:
        """Whether this process sent turn `turn` to a worker (and announces its events)."""
        return self.turns_sent is not None and (self.id, turn) in self.turns_sent.sent

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def turns(self) -> int:
        return self.info.turns

    async def _cancel_background(self) -> None:
        task, self._background = self._background, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def settle(self) -> None:
        """Wait for after-turn subprocesses to finish, and for the last turn's memories to be
        written to the field."""
        task, self._background = self._background, None
        if task is not None:
            await task
        await self._written()

    async def _written(self) -> None:
        """Wait for the last turn's memory writes (`_remember`): reads of the field wait for
        them anyway; this is for `settle()` and `close()`."""
        writing, self._writing = self._writing, None
        if writing is not None and not writing.done():
            await asyncio.wrap_future(writing)

    async def _run(self, text: str, kind: str, emit: Callable[[Any], None] | None,
                   persona: str | None = None) -> TurnResult:
        if self.turns_sent is not None and kind == "message":
            async with self._turn_lock():
                return await self.turns_sent.send(self, replace_lone_surrogates(text), emit)
        async with self._turn_lock():
            if kind == "message" and self.work is not None:
                self.work.triggers.user_spoke()  # its impulses go into this turn: no batch waits
            mind = self.mind
            impulses = mind.drain_impulses() if mind is not None else ()
            return await self._run_locked(text, kind, emit, impulses, persona)

    async def _run_locked(self, text: str, kind: str, emit: Callable[[Any], None] | None,
                          impulses: tuple[str, ...], persona: str | None = None) -> TurnResult:
        work = self._held(text, kind, emit, impulses, persona)
        if tracing.on():  # the turn's span: its steps, calls and tools below it
            return await tracing.turn(work, self.plan.blueprint.name, self.id, kind, text)  # type: ignore[no-any-return]
        return await work

    async def _held(self, text: str, kind: str, emit: Callable[[Any], None] | None,
                    impulses: tuple[str, ...], persona: str | None = None) -> TurnResult:
        await self._cancel_background()  # a new input cancels what still runs from the last turn
        memory = self.services.memory
        if memory is None or not memory.leased:
            return await self._turn(text, kind, emit, impulses, persona, None)
        with memory.using():  # a partitioned field: this user's partition, held for the turn
            fence = await asyncio.to_thread(memory.hold)  # may rebuild the partition: not on the loop
            return await self._turn(text, kind, emit, impulses, persona, fence)

    async def _turn(self, text: str, kind: str, emit: Callable[[Any], None] | None, impulses: tuple[str, ...],
                    persona: str | None, fence: Fence | None) -> TurnResult:
        # the last turn's memory write, if it still runs (a conversation's next message rarely
        # comes this soon): waited for here, not raced — two threads of one session's work
        # would only take turns at the GIL, and this turn's recall needs the write done anyway
        await self._written()
        if self.loops_in_workers:
            self.work.restore()  # SOUL_RUNNER=dbos: a worker ran the cycles; read what they left
        text = replace_lone_surrogates(text)  # before anything is shown, prompted or stored
        started = time.perf_counter()
        plan, services, store = self.plan, self.services, self.store
        if self._warms and services.memory is not None and text.strip():
            services.memory.warm(text)  # embedded in a worker thread while the turn starts
        snapshot = store.snapshot(self.id, ttl_hours=plan.blueprint.memory_ttl_hours)
        kept, self._kept = self._kept, None  # the controller goes on once: a rewrite restores
        ts = start_turn(plan, services, snapshot, text, kind, session=self.id, kept=kept)
        if persona is not None:  # this turn's system prompt head (trusted), in place of the persona file
            ts.ctx = ts.ctx.changed(persona=persona)
        mind = self.mind
        if mind is not None:  # the mood it starts with, and the impulses drained into it
            ts.ctx = ts.ctx.changed(mind=mind.for_turn(impulses).variables())
        gate = self._gate if kind == "message" else None
        held = HeldEvents() if gate is not None else None  # a draft shows nothing before the verdict
        await ScopeRunner(plan, plan.turn, services, held if held is not None else emit).run(ts)
        gated: dict[str, Any] | None = None
        if gate is not None and held is not None:
            ts, gated = await gate_reply(plan, services, self.id, self._order, gate, ts, snapshot, text, held, emit)
        chetana_state = ts.cognition.finish() if ts.cognition else None
        total_ms = (time.perf_counter() - started) * 1000
        trace = Trace(
            turn=ts.ctx.number, kind=kind, input=text, steps=tuple(ts.steps), calls=tuple(ts.calls),
            framework_ms=total_ms - busy_seconds(ts.provider_spans) * 1000, total_ms=total_ms,
            events=(tuple({"event": n, **d} for n, d in ts.cognition.events) if ts.cognition else ())
            + ((gated,) if gated else ()),
        )
        # a cancellation (Ctrl-C) requested while the turn ran without yielding — a tool
        # blocking the loop, a model answering at once — lands here, before anything is stored.
        # Asked of the task rather than by yielding: a yield here queued every turn behind all
        # the loop's ready work, which a server with 500 clients paid in its p95 (issue 26)
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
        reply = reply_of(ts, self._order)
        items = memory_items(plan, ts, self._order, reply, kind)
        # the items go with the commit (a partition is rebuilt from them), under the lease's fence
        more: dict[str, Any] = {"remember": tuple(items) if items else None, "fence": fence}
        if mind is not None:
            more.update(process=mind.process, cycle=mind.cycle)
        events: tuple[Any, ...] = ()
        if ts.cognition is not None:
            more["chetana"] = chetana_state
            events = ts.cognition.event_records()
        commit, reply = build_commit(snapshot, ts, self._order, kind, trace, reply, events, **more)
        # the JSONL lines go with the memory writes, after the reply, when there is a memory to
        # write to (its worker thread runs anyway); else in the commit, as every store commit does
        applied = store.apply(commit, logs_later=services.memory is not None)
        logs = applied.pending_logs
        try:
            if ts.cognition is not None and chetana_state is not None:
                # stored: the controller goes on next turn if the state read back is this one
                self._kept = ts.cognition.keep(chetana_state)
            turn = applied.turn
            self.info = applied.session or store.session(self.id)  # as the transaction left it
            if mind is not None and self.work is not None:  # the next cycle sees what this turn said
                mind.observe_turn(observed_in(commit.messages, reply, kind))
                self.work.after_turn()
            use = recall_use(plan.blueprint.memory, plan.turn.steps, ts.outputs, [c.raw for c in ts.calls], reply, text)
            # written after the reply, in a worker thread
            await self._remember(items, ts.recalled, use, applied.commit_id, logs)
            logs = None  # handed to the writes
        finally:
            if logs is not None:  # not handed to them (an error after the commit): appended here
                logs()
        spontaneous = kind == "spontaneous"
        if emit is not None:
            if reply or not spontaneous:  # a spontaneous turn that stays silent shows nothing
                emit(Reply(reply, spontaneous))
            emit(TurnCommitted(self.id, turn))
        if plan.subprocesses:
            self._background = asyncio.create_task(self._subprocesses(ts, emit))
        outputs = {name: dict(out) for name, out in ts.outputs.items()}
        return TurnResult(reply=reply, session_id=self.id, turn=turn, steps=outputs, trace=trace, kind=kind)

    async def _subprocesses(self, turn_state: TurnState, emit: Callable[[Any], None] | None) -> None:
        plan, services, store = self.plan, self.services, self.store
        for name, scope in plan.subprocesses.items():
            ts = TurnState(turn_state.ctx, dict(turn_state.outputs), done=dict(turn_state.done), session=turn_state.session)
            runner = ScopeRunner(plan, scope, services, None)
            if not runner.scope_open(ts):  # the subprocess's `every` and `when`, from the plan
                continue
            snapshot = store.snapshot(self.id, ttl_hours=plan.blueprint.memory_ttl_hours)
            await runner.run(ts)
            trace = Trace(turn=ts.ctx.number, kind=f"subprocess:{name}", input=ts.ctx.text, steps=tuple(ts.steps), calls=tuple(ts.calls))
            commit, _ = build_commit(snapshot, ts, tuple(scope.steps), "subprocess", trace)
            if commit.messages or commit.state is not None or commit.user_model is not None or commit.memory:
                store.commit(commit)
                self.info = store.session(self.id)
            await self._remember([], ts.recalled)
            if emit is not None:
                emit(SubprocessFinished(name, True))

    async def _remember(self, items: list[dict[str, Any]], recalled: Sequence[str] = (), use: RecallUse | None = None,
                        commit: int | None = None, logs: Callable[[], None] | None = None) -> None:
        """Write the turn's memories and log its recalls as accesses; the turn is already
        committed, so a failure here is logged, not raised (the turn stands; the memory is
        lost and the log says so). A turn that failed never gets here: its recalls log nothing.
        With `memory.learn`, `use` (which recalled memories the turn used) is fed back too.
        `logs`: the commit's JSONL lines, appended first (`Applied.pending_logs`).

        Remembering embeds and extracts entities (CPU-bound, seconds on a long text), so it
        runs in a worker thread, and the turn returns without waiting for it: every read of
        the field (the next turn's recall, `soul memory`, another session's) waits for it
        first (`MemoryBridge.writes`), as do `settle()` and `close()`. A partitioned field's
        writes finish inside the turn: its lease is held for the turn only."""
        memory = self.services.memory
        if memory is None:
            if items:
                log.warning("session %s: %d memory item(s) dropped: these services have no memory bridge", self.id, len(items))
            if logs is not None:
                logs()
            return
        if recalled or use is not None or items or logs is not None:  # one trip to a worker thread for all
            writing = memory.writes.submit(self.id, partial(write_turn, memory, self.id, items, recalled, use, commit, logs))
            if memory.leased:
                await asyncio.wrap_future(writing)
            else:
                self._writing = writing

    async def turn(self, text: str, *, on_event: Callable[[Any], None] | None = None,
                   persona: str | None = None) -> TurnResult:
        """Run one turn on a user message and commit it; `on_event` gets the turn's events
        as `stream` yields them (a server forwarding them still needs the TurnResult).

        `persona` is this turn's system prompt head in place of the blueprint's persona file —
        trusted text, sent unescaped in the system message (a dialogue agent's persona formatted
        from its drives, with its seed); never put another party's words there: they belong in
        `text`, which is fenced as untrusted input.

        Lone surrogates in `text` (invalid UTF-8 decoded with `surrogateescape`) become U+FFFD
        before the turn starts; nothing is refused for its encoding."""
        return await self._run(text, "message", on_event, persona)

    async def spontaneous(self) -> TurnResult:
        """Run a turn nobody asked for (as a trigger does): no user message; it takes the
        pending S_loud impulses."""
        return await self._run("", "spontaneous", None)

    def turn_sync(self, text: str) -> TurnResult:
        """`turn` for synchronous code; also waits for the turn's subprocesses. Lone
        surrogates in `text` become U+FFFD, as in `turn`."""

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            from soul.errors import RunError

            raise RunError("turn_sync() cannot run inside a running event loop; use `await session.turn(text)`")

        async def go() -> TurnResult:
            result = await self._run(text, "message", None)
            await self.settle()
            return result

        return asyncio.run(go())

    async def stream(self, text: str) -> AsyncIterator[Any]:
        """Yield the turn's events as they happen; the last is TurnCommitted. Lone surrogates
        in `text` become U+FFFD before any event, as in `turn`."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        done = object()

        async def work() -> None:
            try:
                await self._run(text, "message", queue.put_nowait)
            finally:
                queue.put_nowait(done)

        task = asyncio.create_task(work())
        try:
            while True:
                event = await queue.get()
                if event is done:
                    break
                yield event
            await task  # re-raises the turn's error, if any
        finally:
            if not task.done():
                task.cancel()
