"""A session's background work: its processes' cycles (AgentCSD's subconscious) and triggers.

Each `processes:` entry gets a `Mind` (the state it shares with the turns), a `LoopRunner`
(in-process asyncio; `runtime/background/processes.py`; the factory is given the session id and the
process name) and a cycle: the process's steps run on their own
model slot with the Persona Core the session snapshotted as system prompt and, as input, what
changed since the last cycle plus the process's loud and quiet histories. A cycle commits in
one transaction (its messages, the mood & criteria, its cycle number) before the mind takes
its results: a failed or cancelled cycle changes nothing and gives back what it took. The
commit is `once=True`: a cycle number is applied at most once per (session, process), so a
cycle re-run after a crash (`run_cycle`, what a durable worker calls) is a no-op.
Every `summarize_every` cycles, a history longer than `history` entries has its older part
folded by the process's model into "[Previous summary]: …"; when that call fails a truncation
digest takes its place (and the log says so), so the window stays bounded either way.

Events (`CycleStarted`, `CycleFinished`, `ImpulseQueued`, `MoodChanged`, `LoopStatus`,
`TriggerFired`) go to the session's listeners.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from soul.compiler import Plan, ScopePlan
from soul.errors import RunError
from soul.records import Commit, MoodRecord, SummaryRecord
from soul.runtime import tracing
from soul.runtime.background.mind import SUMMARY_PREFIX, CycleInput, CycleResult, Mind
from soul.runtime.background.processes import AsyncioRunner, LoopRunner, LoopSchedule, runner_choice
from soul.runtime.background.triggers import Triggers, TriggerSpec
from soul.runtime.conversation import DEFAULT_WORDS, SummaryCall, instructions, system_prompt
from soul.runtime.conversation import truncation_digest as _digest
from soul.runtime.events import (
    CycleFinished,
    CycleStarted,
    ImpulseQueued,
    LoopStatus,
    MoodChanged,
    Trace,
)
from soul.runtime.turn import ScopeRunner, Services, TurnState, build_commit, context_for

if TYPE_CHECKING:
    from soul.store import SessionStore

log = logging.getLogger(__name__)

Emit = Callable[[Any], None]
RunnerFactory = Callable[[str, str], LoopRunner]  # (session id, process name) -> its runner


def _asyncio_runner(session_id: str, process: str) -> LoopRunner:
    return AsyncioRunner()


@dataclass
class Process:
    """One background process of a session."""

    name: str
    scope: ScopePlan
    mind: Mind
    runner: LoopRunner
    schedule: LoopSchedule
    persona: str | None  # the Persona Core snapshot (None: the blueprint's persona)
    summarize_every: int
    model: str | None


class Background:
    """The processes and triggers of one session (started by `Session.start`)."""

    def __init__(self, plan: Plan, services: Services, store: SessionStore, session_id: str,
                 emit: Emit, fire: Callable[[str, str], Awaitable[Any]],
                 runner: RunnerFactory | str | None = None) -> None:
        self.plan, self.services, self.store, self.session_id = plan, services, store, session_id
        self.emit = emit
        self.processes: dict[str, Process] = {}
        factory = runner if callable(runner) else _asyncio_runner
        for name, scope in plan.processes.items():
            declared = plan.blueprint.processes[name]
            options = declared.options
            mind = Mind(name, history=int(options.get("history") or 20))
            self.processes[name] = Process(
                name, scope, mind, factory(session_id, name), LoopSchedule.of(options, declared.loop),
                None, int(options.get("summarize_every") or 10), declared.model,
            )
        self.triggers = Triggers(list(TriggerSpec.all_of(plan.blueprint).values()), fire)
        self.started = False
        # runner="dbos" (or SOUL_RUNNER=dbos): `soul worker` processes run the cycles and fire
        # the triggers; this process re-reads the minds before each turn (`restore`).
        # A factory runs the loops here, whatever the environment says.
        self.delegated = not callable(runner) and runner_choice(runner) == "dbos"

    @property
    def mind(self) -> Mind | None:
        """The first process's mind (AgentCSD has one subconscious)."""
        return next((p.mind for p in self.processes.values()), None)

    def restore(self) -> None:
        """Resume: each mind from the store, each Persona Core from its snapshot."""
        for proc in self.processes.values():
            self._restore(proc)

    def _restore(self, proc: Process) -> None:
        # a fresh Mind: restoring into a used one would append the histories twice
        proc.mind = Mind(proc.name, history=proc.mind.history)
        proc.mind.restore(self.store.mind_history(self.session_id, proc.name))
        core = self.store.persona_core(self.session_id, proc.name)
        proc.persona = core.text if core is not None else None

    async def run_cycle(self, process: str, number: int) -> bool:
        """Run cycle `number` of `process` once, resuming its mind from the store first
        (what a durable runner's workflow does). False when that cycle is already stored
        (a re-run after a crash: nothing runs, no model is called)."""
        proc = self.processes.get(process)
        if proc is None:
            raise RunError(f"session {self.session_id}: the soul has no background process {process!r}")
        self._restore(proc)
        if proc.mind.cycle >= number:
            return False
        if proc.mind.cycle + 1 != number:
            raise RunError(f"session {self.session_id}: cycle {number} of {process!r} cannot run before"
                           f" cycle {proc.mind.cycle + 1}; the store holds {proc.mind.cycle} cycles")
        await self.cycle(proc)
        return True

    def start(self, cycles: int | None = None) -> None:
        if self.started:
            return
        self.started = True
        for proc in self.processes.values():
            schedule = replace(proc.schedule, cycles=cycles)

            def status(s: str, proc: Process = proc) -> None:
                self.emit(LoopStatus(proc.name, s, proc.mind.cycle))

            def failed(exc: BaseException, delay: float, proc: Process = proc) -> None:
                self.emit(CycleFinished(proc.name, proc.mind.cycle + 1, {}, f"{type(exc).__name__}: {exc}", delay))

            if not self.delegated:
                proc.runner.start(lambda proc=proc: self.cycle(proc), schedule, status, failed)  # type: ignore[misc]
        if not self.delegated:  # delegated: `soul worker` fires them (runtime/durable/triggers.py)
            self.triggers.start()

    def after_turn(self) -> None:
        """A turn was committed: `after_turn` loops cycle once."""
        for proc in self.processes.values():
            proc.runner.wake()

    def pause(self) -> None:
        for proc in self.processes.values():
            proc.runner.pause()

    def resume(self) -> None:
        for proc in self.processes.values():
            proc.runner.resume()

    async def done(self) -> None:
        """Wait for bounded loops to finish and for triggers to settle."""
        for proc in self.processes.values():
            await proc.runner.done()
        await self.triggers.settle()

    async def stop(self) -> None:
        for proc in self.processes.values():
            await proc.runner.stop()
        await self.triggers.stop()
        self.started = False

    # -- one cycle ---------------------------------------------------------------------

    async def cycle(self, proc: Process) -> None:
        taken = proc.mind.begin_cycle()
        self.emit(CycleStarted(proc.name, taken.cycle))
        try:
            run = self._run(proc, taken)
            if tracing.on():
                run = tracing.cycle(run, self.plan.blueprint.name, self.session_id, proc.name, taken.cycle)
            outputs, result, commit_cycle = await run
        except BaseException:
            proc.mind.undo(taken)  # nothing committed: what it took is pending again
            raise
        changed = proc.mind.end_cycle(result)
        self.emit(CycleFinished(proc.name, taken.cycle, outputs))
        if changed:
            self.emit(MoodChanged(proc.name, taken.cycle, proc.mind.mood, proc.mind.criteria))
        if (result.loud or "").strip():
            pending = len(proc.mind.pending)
            self.emit(ImpulseQueued(proc.name, taken.cycle, result.loud.strip(), result.trigger, pending))  # type: ignore[union-attr]
            self.triggers.impulse(proc.name, result.trigger, pending)
        if commit_cycle % proc.summarize_every == 0:
            await self.summarize(proc, commit_cycle)

    async def _run(self, proc: Process, taken: CycleInput) -> tuple[dict[str, dict[str, Any]], CycleResult, int]:
        plan, store = self.plan, self.store
        started = time.perf_counter()
        snapshot = store.snapshot(self.session_id, ttl_hours=plan.blueprint.memory_ttl_hours)
        ctx = context_for(plan, snapshot, "", "cycle")
        ctx = replace(ctx, number=snapshot.session.turns, persona=proc.persona,
                      mind=taken.variables(), inject_user_model=False, memory={})
        ts = TurnState(ctx, {}, session=self.session_id)
        await ScopeRunner(plan, proc.scope, self.services, None).run(ts)
        result = cycle_result(proc.scope, ts.outputs, taken.cycle)
        total_ms = (time.perf_counter() - started) * 1000
        trace = Trace(turn=snapshot.session.turns, kind=f"cycle:{proc.name}", input="",
                      steps=tuple(ts.steps), calls=tuple(ts.calls), total_ms=total_ms)
        commit, _ = build_commit(snapshot, ts, tuple(proc.scope.steps), "cycle", trace)
        mood = MoodRecord(result.mood or "", result.criteria or "") if (result.mood or result.criteria) else None
        commit = replace(commit, process=proc.name, cycle=taken.cycle, mood=mood)
        store.commit(commit, once=True)  # a replayed cycle number is a no-op
        if ts.recalled and self.services.memory is not None:  # committed: its recalls count
            await asyncio.to_thread(self.services.memory.touch, ts.recalled)
        return {n: dict(o) for n, o in ts.outputs.items()}, result, taken.cycle

    # -- summaries ---------------------------------------------------------------------

    async def summarize(self, proc: Process, cycle: int) -> None:
        """Fold every history over its window; a failed summary call becomes a digest."""
        records = []
        for name, (previous, older, first, last) in proc.mind.overflowing().items():
            try:
                text = await self._summary_call(proc, name, previous, older)
                digest = False
            except Exception as exc:  # the window stays bounded: a digest instead
                log.warning("session %s: summarising %s failed (%s); kept a truncation digest", self.session_id, name, exc)
                text, digest = truncation_digest(previous, older), True
            records.append(SummaryRecord(name, proc.mind.fold(name, text, len(older)), first, last, digest))
        if records:
            # a commit of summaries only; a cycle commit is stamped with the turn count it meets
            turns = self.store.session(self.session_id).turns
            trace = Trace(turn=turns, kind=f"summary:{proc.name}", input="")
            self.store.commit(Commit(self.session_id, turns, trace=trace.to_dict(), kind="cycle",
                                     process=proc.name, cycle=cycle, summaries=tuple(records)))

    async def _summary_call(self, proc: Process, name: str, previous: str | None, older: tuple[str, ...]) -> str:
        provider, spec, options = self.services.provider(proc.model or self.plan.blueprint.model)
        bp = self.plan.blueprint
        guide = instructions(self.services.builder.env, {"name": bp.name, "title": bp.name.title()},
                                       DEFAULT_WORDS)
        system = system_prompt(bp.name, name.replace("_", " "), guide)
        text, _ = await SummaryCall(provider, spec, options).run(system, previous, older)
        return text


def truncation_digest(previous: str | None, older: tuple[str, ...]) -> str:
    """What stands in for a summary the model could not write (`runtime/conversation/summaries.py`,
    the "[Previous summary]: " prefix of the old summary left out)."""
    return _digest(previous, older, SUMMARY_PREFIX)


def cycle_result(scope: ScopePlan, outputs: Mapping[str, Mapping[str, Any]], cycle: int) -> CycleResult:
    """What a cycle's steps said, read by kind: `mood_and_criteria` steps set the mood,
    `s_loud` steps the impulse, its quiet notes and the trigger."""
    mood = criteria = loud = quiet = None
    trigger = False
    for name, step in scope.steps.items():
        out = outputs.get(name) or {}
        if step.kind.name == "mood_and_criteria":
            mood = out.get("mood") or mood
            criteria = out.get("criteria") or criteria
        elif step.kind.name == "s_loud":
            loud = out.get("loud") or loud
            quiet = out.get("quiet") or quiet
            trigger = trigger or out.get("trigger") is True
    return CycleResult(cycle, mood, criteria, loud, quiet, trigger)
