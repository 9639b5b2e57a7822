"""Session: one conversation with one user — turns, streaming, and after-turn subprocesses.

`await session.turn(text)` runs a turn and commits it; `session.turn_sync(text)` does the same
from synchronous code (and waits for subprocesses); `async for event in session.stream(text)`
yields StepStarted / Token / StepFinished / Reply / TurnCommitted as they happen. Subprocesses
run after the reply is delivered and are cancelled by the next input (Open Souls semantics):
a cancelled subprocess writes nothing.

A session runs its turns from the soul's plan and services (`runtime/services.py`) and commits
them through the session store; it knows nothing of the `Soul` that opened it.

Text policy: a message holding lone surrogates (invalid UTF-8 read with `surrogateescape`, a
stray `\ud83d`) is not refused: each lone surrogate becomes U+FFFD before the turn starts, so
what is shown, prompted and stored is the same encodable text. Model replies get the same.
A turn that is cancelled or interrupted (Ctrl-C) before its commit stores nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from soul.compiler import Plan
from soul.records import SessionInfo
from soul.runtime.events import Reply, SubprocessFinished, Trace, TurnCommitted, TurnResult
from soul.runtime.services import Services
from soul.runtime.surrogates import replace_lone_surrogates
from soul.runtime.turn import (
    ScopeRunner,
    TurnState,
    build_commit,
    busy_seconds,
    memory_items,
    start_turn,
)

if TYPE_CHECKING:
    from soul.store import SessionStore

log = logging.getLogger(__name__)


class Session:
    """A stored conversation; create with `Soul.session()`."""

    def __init__(self, plan: Plan, services: Services, store: SessionStore, info: SessionInfo) -> None:
        self.plan = plan
        self.services = services
        self.store = store  # where the session lives: snapshots, commits, traces
        self.info = info
        self._order = tuple(plan.turn.steps)  # plan order: the order changes are committed in
        self._background: asyncio.Task[None] | None = None

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
        """Wait for after-turn subprocesses to finish."""
        task, self._background = self._background, None
        if task is not None:
            await task

    async def _run(self, text: str, kind: str, emit: Callable[[Any], None] | None) -> TurnResult:
        await self._cancel_background()  # a new input cancels what still runs from the last turn
        text = replace_lone_surrogates(text)  # before anything is shown, prompted or stored
        started = time.perf_counter()
        plan, services, store = self.plan, self.services, self.store
        snapshot = store.snapshot(self.id, ttl_hours=plan.blueprint.memory_ttl_hours)
        ts = start_turn(plan, services, snapshot, text, kind, session=self.id)
        await ScopeRunner(plan, plan.turn, services, emit).run(ts)
        chetana_state = ts.cognition.finish() if ts.cognition else None
        total_ms = (time.perf_counter() - started) * 1000
        trace = Trace(
            turn=ts.ctx.number, kind=kind, input=text, steps=tuple(ts.steps), calls=tuple(ts.calls),
            framework_ms=total_ms - busy_seconds(ts.provider_spans) * 1000, total_ms=total_ms,
            events=tuple({"event": n, **d} for n, d in ts.cognition.events) if ts.cognition else (),
        )
        commit, reply = build_commit(snapshot, ts, self._order, kind, trace)
        if ts.cognition is not None:
            commit = replace(commit, chetana=chetana_state, messages=commit.messages + ts.cognition.event_records())
        turn = store.commit(commit)
        self.info = store.session(self.id)
        await self._remember(memory_items(plan, ts, self._order, reply, kind))
        if emit is not None:
            emit(Reply(reply))
            emit(TurnCommitted(self.id, turn))
        if plan.subprocesses:
            self._background = asyncio.create_task(self._subprocesses(ts, emit))
        outputs = {name: dict(out) for name, out in ts.outputs.items()}
        return TurnResult(reply=reply, session_id=self.id, turn=turn, steps=outputs, trace=trace)

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
            if emit is not None:
                emit(SubprocessFinished(name, True))

    async def _remember(self, items: list[dict[str, Any]]) -> None:
        """Write the turn's memories; the turn is already committed, so a failure here is
        logged, not raised (the turn stands; the memory is lost and the log says so).

        Remembering embeds and extracts entities (CPU-bound, seconds on a long text), so it
        runs in a worker thread: an app's event loop keeps serving while it does."""
        if not items:
            return
        memory = self.services.memory
        if memory is None:
            log.warning("session %s: %d memory item(s) dropped: these services have no memory bridge", self.id, len(items))
            return
        try:
            await asyncio.to_thread(memory.remember, items, session=self.id)
        except Exception:
            log.exception("session %s: remembering %d item(s) after the turn failed", self.id, len(items))

    async def turn(self, text: str) -> TurnResult:
        """Run one turn on a user message and commit it.

        Lone surrogates in `text` (invalid UTF-8 decoded with `surrogateescape`) become U+FFFD
        before the turn starts; nothing is refused for its encoding."""
        return await self._run(text, "message", None)

    async def spontaneous(self) -> TurnResult:
        """Run a turn nobody asked for (a trigger fired): no user message."""
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
