"""Running a turn: a Plan and its Services + a session snapshot + an input → the steps' outputs,
traces, and the changes to commit.

Units run layer by layer; the units of a layer run concurrently (asyncio). Before a unit, its
steps' `every` and before-phase `when` gates decide which steps it asks for; after a fused
call, after-phase gates decide whether a step's changes apply. Nothing is written here: the
turn's changes are gathered into one `Commit` that the session store applies atomically.
Everything a turn needs comes from the plan (steps bound to their kinds, units, gates) and its
`Services`; `soul explain` walks this same code with nothing real done (`runtime/dry_run.py`).

A step that has not run (skipped, gated, or answered later in the same call) reads as
`NotRun` in templates and gates: every declared output None, never an error. A template or
gate that still fails becomes a StepError naming the step — before the call, so before
anything of it is streamed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from jinja2 import TemplateError

from soul.compiler import CallPlan, Plan, PlannedStep, ScopePlan, Unit
from soul.errors import RunError, SoulError, StepError
from soul.kinds import ChangeContext, StepEnv
from soul.records import MemoryEntry
from soul.runtime import tracing
from soul.runtime.conversation import Budget, fold_history, labelled
from soul.runtime.events import StepFinished, StepStarted, StepTrace
from soul.runtime.tools import ToolUse, tools_of
from soul.runtime.turn.calls import BoundCall, CallOutcome, run_call
from soul.runtime.turn.context import TurnContext, TurnState
from soul.runtime.turn.eager import adopt, finish_waiting
from soul.runtime.turn.gates import EXPRESSION_ERRORS, AfterTheCall, after_the_call, every_open
from soul.runtime.turn.prompting.fitting import Prompt
from soul.runtime.turn.prompting.prompt import MESSAGE_NOTE, MOMENT_NOTE, Variables
from soul.runtime.turn.services import Services
from soul.sections import Instructions, instructions_of

GatedOff = Callable[[str, dict[str, Any]], bool]
# the turn as a layer of concurrent units found it when it began — its context and the steps
# done — which is what each of them reads (None: a lone unit, which reads the turn as it is)
Seen = tuple[TurnContext, Mapping[str, Any]]


def _said(ctx: TurnContext, done: Mapping[str, Any]) -> tuple[str, ...]:
    """What the turn said before a call: the user's message and earlier steps' text outputs."""
    return (ctx.text, *(v for out in done.values() if isinstance(out, Mapping)
                           for v in out.values() if isinstance(v, str) and v))


def _no_memory() -> Any:
    raise RunError("this run has no memory field: its services were built without a memory bridge")


class ScopeRunner:
    """Runs the units of one scope (the turn, or a subprocess) against a TurnState.

    The walk — layers, units, gates, outputs, traces — is this class. What a step or a call
    *does* is two methods, `step_outputs` and `ask`: a dry run replaces them (and applies no
    changes), so `soul explain` walks exactly this code.
    """

    applies_changes: ClassVar[bool] = True
    # a runner is made for every run of a scope (a turn's graph): its fields in slots, not an
    # instance dict filled and freed each time (a subclass may still add its own)
    __slots__ = ("_change_ctx", "applies", "builder", "emit", "folds", "gates", "last", "not_run", "order", "plan",
                 "scope", "services", "state_spec", "traced", "units", "walk")

    def __init__(self, plan: Plan, scope: ScopePlan, services: Services, emit: Callable[[Any], None] | None = None) -> None:
        self.scope = scope
        self.plan = plan
        self.services = services
        # the class's choice read once into a field (CPython 3.11 reads a class attribute through
        # an instance by its slow path: the runner reads it on every call)
        applies = self.applies = self.applies_changes
        # only a turn's own history folds (not a subprocess's or a cycle's view of it)
        self.folds = applies and scope is plan.turn
        self.builder = services.builder
        self.gates = services.gates
        self.emit = emit
        self.state_spec = plan.blueprint.state
        # every step a template or gate may name, as it reads before (or without) running
        shared = services.scoped(plan, scope)
        self.not_run = shared.not_run
        self.order = shared.order  # each step's place in plan order
        self.last = len(self.order)
        self._change_ctx: ChangeContext | None = None
        # whether units and calls run in spans (decided per run: `tracing.reset` decides again)
        self.traced = applies and tracing.on()
        # each whole unit's call plan and binding, once found (a dry run binds none)
        self.units = shared.units if applies else {}
        self.walk = shared.walk

    def variables(self, ts: TurnState, params: Mapping[str, Any] | None = None, seen: Seen | None = None,
                  names: Collection[str] | None = None) -> dict[str, Any]:
        """What templates and gates see: the context (as the unit's layer found it, given
        `seen`) with every step's outputs, NotRun for the steps not run; given `names` (what
        a gate reads, `GateEvaluator.reads`), only those."""
        ctx = ts.ctx if seen is None else seen[0]
        if names is None:
            return self.builder.variables(ctx, params, {**self.not_run, **ts.outputs})
        return self.builder.variables(ctx, params, {**self.not_run, **ts.outputs} if "steps" in names else None, names)

    def _when_open(self, name: str, expression: str, ts: TurnState, seen: Seen | None, kind: str | None = None) -> bool:
        """Whether `name`'s `when` is true now, given only the variables it reads."""
        gates = self.gates
        return gates.when_open(name, expression, self.variables(ts, seen=seen, names=gates.reads(expression)), kind)

    def _did(self, ts: TurnState, name: str, outputs: dict[str, Any]) -> None:
        """`name`'s outputs among the steps done, which are kept in plan order (the order
        "This Turn So Far" lists them in), whatever order concurrent units finish in."""
        done = ts.done
        at = self.order.get(name, self.last)  # a step of no scope here goes after the others
        if at >= ts.reach or name in done:  # in order (always so but for concurrent units)
            done[name] = outputs
            if at > ts.reach:
                ts.reach = at
            return
        done[name] = outputs
        order, last = self.order, self.last
        ranked = sorted(done.items(), key=lambda item: order.get(item[0], last))
        done.clear()
        done.update(ranked)
        ts.reach = order.get(ranked[-1][0], last)

    def scope_open(self, ts: TurnState) -> bool:
        """Whether the scope's own gate (a subprocess's `every` and `when`) lets it run now."""
        gate = self.scope.gate
        if gate is None:
            return True
        if not every_open(gate, ts.ctx.number):
            return False
        name = self.scope.scope.partition(":")[2] or self.scope.scope
        return not gate.when or self._when_open(name, gate.when, ts, None)

    async def run(self, ts: TurnState) -> None:
        units, gated = self.scope.units, self.scope.gated  # units are numbered from 1
        traced = self.traced  # every unit in its span: through run_unit
        for layer, call in self.walk:  # (a layer that is one call asking for all its steps: `ScopeRuns.walk`)
            if call is not None and not traced:  # no task needed for a lone unit: a chain pays no scheduling
                await self.run_llm_unit(call, call.steps, ts)
                continue
            if len(layer) == 1:
                await self.run_unit(units[layer[0] - 1], ts)
                continue
            # The units of a layer run concurrently: each is started in place and only the ones
            # that wait go to the loop (`eager.adopt`). This is `eager.start_eagerly`'s loop,
            # inline and making one unit at a time: calling it, over a list or a generator of
            # the units, cost a fan-out 0.3-0.4 us a step. Each unit reads the turn as the layer
            # found it (`seen`), so what one shows never depends on whether a sibling started
            # before it finished (a replayed cassette's prompts are the recorded ones).
            seen = (ts.ctx, dict(ts.done))
            waiting: list[tuple[int, asyncio.Future[Any]]] | None = None
            for i in layer:
                unit = units[i - 1]
                if unit.model is not None and unit.index not in gated and not traced:
                    coro = self.run_llm_unit(unit, unit.steps, ts, seen)
                else:
                    coro = self.run_unit(unit, ts, seen)
                try:
                    yielded = coro.send(None)
                except StopIteration:
                    continue
                except BaseException:
                    for _, future in waiting or ():
                        future.cancel()
                    raise
                if waiting is None:
                    waiting = []
                waiting.append((i, adopt(asyncio.get_running_loop(), coro, yielded)))
            if waiting:
                await finish_waiting(waiting)
        # a turn folds only when its calls had to leave older turns out (none showed them all)
        if self.folds and ts.shown and not ts.whole and max(ts.shown) < len(ts.ctx.history) \
                and ts.ctx.kind in ("message", "spontaneous"):
            await fold_history(self.plan, self.services, ts)

    def budget(self, call: CallPlan) -> Budget | None:
        """The window, reply reserve, token counter and history declaration of a call."""
        return self.services.bind(call).budget

    async def run_unit(self, unit: Unit, ts: TurnState, seen: Seen | None = None) -> None:
        planned = self.scope.steps
        if unit.index not in self.scope.gated:  # no step of the unit has a gate: all of them run
            if self.traced:
                await self._run_traced(unit, unit.steps, ts, seen)
            elif unit.model is not None:
                await self.run_llm_unit(unit, unit.steps, ts, seen)
            else:
                for name in unit.steps:
                    await self.run_local_step(planned[name], ts, seen)
            return
        active = []
        for name in unit.steps:
            step = planned[name]
            gate = step.gate
            if gate is not None:
                if not every_open(gate, ts.ctx.number):
                    ts.steps.append(StepTrace(name, step.kind.name, "skipped", {}, gate=gate.describe()))
                    continue
                if gate.when and gate.phase == "before" and not self._when_open(name, gate.when, ts, seen, step.kind.name):
                    ts.steps.append(StepTrace(name, step.kind.name, "gated", {}, gate=gate.describe()))
                    continue
            active.append(name)
        if not active:
            return
        await self._run_traced(unit, active, ts, seen)

    async def _run_traced(self, unit: Unit, active: Sequence[str], ts: TurnState, seen: Seen | None = None) -> None:
        """A unit's active steps, in the unit's span when spans are made (a dry run makes none)."""
        if self.traced:
            planned = self.scope.steps
            steps = [(name, planned[name].kind.name) for name in active]
            await tracing.unit(self._run_active(unit, active, ts, seen), steps, self.scope.scope, ts.steps)
            return
        await self._run_active(unit, active, ts, seen)

    async def _run_active(self, unit: Unit, active: Sequence[str], ts: TurnState, seen: Seen | None = None) -> None:
        if unit.model is not None:  # a model call
            await self.run_llm_unit(unit, tuple(active), ts, seen)
        else:
            planned = self.scope.steps
            for name in active:
                await self.run_local_step(planned[name], ts, seen)

    async def step_outputs(self, step: PlannedStep, ts: TurnState, seen: Seen | None = None) -> dict[str, Any]:
        """A step that makes no model call (Chetana, memory): its kind computes the outputs."""
        # built as the kind reads them (a recall reads `chetana`), from the turn as the step found it
        ctx = ts.ctx if seen is None else seen[0]
        steps = {**self.not_run, **ts.outputs}
        builder, params = self.builder, step.params
        variables = Variables(lambda names: builder.variables(ctx, params, steps, names))
        env = builder.env

        def render(source: str) -> str:
            try:
                return env.from_string(source).render(variables)
            except StepError as exc:  # the sandbox's: name the step that rendered it
                if exc.step is not None:
                    raise
                raise StepError.from_exception(exc, step=step.name, kind=step.kind.name, what="a template parameter") from exc

        memory = self.services.memory
        reader = partial(memory.reader_for, ts.recalling()) if memory is not None else _no_memory
        # the blueprint's memory config, read here (only a step without a model call needs it), not per run
        step_env = StepEnv(variables, render, reader, self.plan.blueprint.memory or {}, ts.ctx.text, ts.session)
        try:
            return await step.kind.run(step.name, step.params, step_env)
        except NotImplementedError as exc:
            raise StepError.from_exception(exc, step=step.name, kind=step.kind.name) from exc
        except TemplateError as exc:
            raise StepError.from_exception(exc, step=step.name, kind=step.kind.name, what="its template failed") from exc

    def ask(self, call: CallPlan, prompt: Prompt, gated_off: GatedOff | None, budget: Budget | None = None,
            tools: ToolUse | None = None, known: Sequence[str] = (),
            instructions: Instructions | None = None, bound: BoundCall | None = None) -> Awaitable[CallOutcome]:
        """One model call of `prompt` over `call`'s steps, through the provider its unit's model
        resolves to (`bound`, when the caller has bound it already; the call's coroutine itself:
        no frame of its own on the hot path); a section repeating `instructions` is re-asked,
        then dropped (`calls.py`). Its trace comes back complete: the prompt's budget, cut and
        layout, and the call's cost. (`budget` is the call's, which a bound call carries: a dry
        run, binding none, counts its prompt with it.)"""
        if bound is None:
            bound = self.services.bind(call)
        return run_call(bound, prompt, self.emit, gated_off, tools, known, instructions)

    async def run_local_step(self, step: PlannedStep, ts: TurnState, seen: Seen | None = None) -> None:
        name, kind = step.name, step.kind
        if self.emit is not None:
            self.emit(StepStarted(name, kind.name))
        started = time.perf_counter()
        outputs = await self.step_outputs(step, ts, seen)
        ms = (time.perf_counter() - started) * 1000
        ts.outputs[name] = outputs
        self._did(ts, name, outputs)
        flags: tuple[str, ...] = ()
        if self.applies:
            changes = kind.changes(name, outputs, ChangeContext(self.state_spec, ts.ctx.state))
            if changes.memory:  # labelled with the step, kind and turn when the commit gathers them
                ts.labels[name] = kind.name
            ts.changes[name] = changes
            flags = tuple(changes.flags)
            if changes.regions:  # working memory for the rest of this turn's prompts
                filled = {region: tuple(labelled(MemoryEntry(region, "recollection", text), name, kind.name, ts.ctx.number)
                                        for text in texts) for region, texts in changes.regions.items()}
                ts.ctx = ts.ctx.changed(memory={**ts.ctx.memory, **changes.regions}, entries={**ts.ctx.entries, **filled})
        ts.steps.append(StepTrace(name, kind.name, "ran", dict(outputs), flags, ms=ms))
        if ts.cognition is not None:
            ts.cognition.record(name, True, ms, outputs)
        if self.emit is not None:
            self.emit(StepFinished(name, dict(outputs), True))

    async def run_llm_unit(self, unit: Unit, active: tuple[str, ...], ts: TurnState, seen: Seen | None = None) -> None:
        found = self.units.get(unit.index) if active is unit.steps else None
        if found is not None:  # a whole unit that ran before: its call plan and binding
            call, bound = found
        else:  # what the call plan is bound to (a dry run binds no provider: its budget is the blueprint's)
            call = self.scope.call_plan(unit, active)
            bound = self.services.bind(call) if self.applies else None
            if bound is not None and active is unit.steps:
                self.units[unit.index] = (call, bound)
        emit = self.emit
        if emit is not None:
            for step in call.steps:
                emit(StepStarted(step.name, step.kind.name))
        budget = bound.budget if bound is not None else self.budget(call)
        if seen is None:  # (not one line: a pair chosen by a conditional is a tuple made and unpacked)
            ctx, said = ts.ctx, ts.done
        else:
            ctx, said = seen
        try:
            # templates see the steps done over NotRun for the rest, made only if one reads them
            prompt = self.builder.build(call.steps, ctx, None, budget, call.where, said, self.not_run)
        except SoulError:
            raise
        except (TemplateError, *EXPRESSION_ERRORS) as exc:
            raise self.builder.render_error(call.steps, ctx, {**self.not_run, **said}, exc) from exc
        if bound is not None and bound.usual and not self.traced:  # no gate after it, no tools, nothing to echo or refuse
            gated_off = None
            outcome = await run_call(bound, prompt, self.emit)
        else:
            gated_off = (after_the_call(self.builder, self.gates, self.not_run, call.after_gates, self.scope.steps, ts,
                                        ctx) if call.after_gates else None)
            outcome = await self._call(call, bound, prompt, gated_off, budget, ts, seen)
        ts.provider_spans.append(outcome.span)  # the call's own clock: read once
        if ts.cognition is not None:  # Chetana learns each tool's outcomes and latencies
            for run in outcome.tool_runs:
                ts.cognition.tool(run.tool, run.ok, run.ms, run.result if run.ok else run.error)
        trace = outcome.trace
        if prompt.budget is not None:  # how many of the history's turns the call showed
            cut = prompt.cut
            if cut:
                ts.showed(len(ts.ctx.history) - sum(c.get("turns", 0) for c in cut if c["part"] == "history"))
            else:  # nothing cut: every turn shown, so the turn does not fold
                ts.whole = True
        ts.calls.append(trace)
        self.apply(call, outcome, ts, seen, gated_off)

    async def _call(self, call: CallPlan, bound: BoundCall | None, prompt: Prompt, gated_off: AfterTheCall | None,
                    budget: Budget | None, ts: TurnState, seen: Seen | None) -> CallOutcome:
        """`run_llm_unit`'s call when it is not the usual one (`BoundCall.usual`): a dry run's,
        one with tools, a gate after it, a section that may echo or refuse, or in a span."""
        if bound is None:  # a dry run calls no tool and parses nothing
            started = time.perf_counter()
            outcome = await self.ask(call, prompt, gated_off, budget)
            outcome.span = (started, time.perf_counter())
            return outcome
        ctx, said = (ts.ctx, ts.done) if seen is None else seen
        tools = tools_of(self, call, ts, seen) if self.services.tools is not None else None
        shape = bound.shape
        # what a section must not parrot: the persona, the response format and the notes around
        # the input (not what was said), when a section of the call reads as text; what a kind's refusals tell a
        # copy of, when one of the call's kinds may refuse
        parroted = instructions_of(self.builder.persona_of(ctx), prompt.form, MESSAGE_NOTE, MOMENT_NOTE) if shape.echoing else None
        # `run_call` itself (`ask`'s call, inline): a bound call is never a dry run's
        asked = run_call(bound, prompt, self.emit, gated_off, tools, _said(ctx, said) if shape.refusing else (), parroted)
        if self.traced:  # the call's span
            attributes = tracing.call_attributes(bound.provider.name, bound.model, bound.options, call.unit.index,
                                                 [s.name for s in call.steps], ts.session)
            asked = tracing.call(asked, attributes)
        return await asked

    def apply(self, call: CallPlan, outcome: CallOutcome, ts: TurnState, seen: Seen | None = None,
              gated_off: AfterTheCall | None = None) -> None:
        """Each step of a call as its reply left it: outputs, status (ran, fallback, failed, or
        gated after the call, on the context its layer found: `seen`), its changes (labelled,
        the state applied for later steps), trace. A gate decided on the reply (`gated_off`)
        over the very values it reads now is not evaluated again (`AfterTheCall.decided`)."""
        state = ts.ctx.state
        change_ctx = self._change_ctx
        if change_ctx is None or change_ctx.state is not state:  # one per state the turn goes through
            change_ctx = self._change_ctx = ChangeContext(self.state_spec, state)
        steps = call.steps
        per_step_ms = outcome.trace.latency_ms
        if len(steps) > 1:  # (divided by one, the same float: not made again)
            per_step_ms /= len(steps)
        emit, applies = self.emit, self.applies
        after_gates, fallbacks = call.after_gates, outcome.fallbacks
        order, done, gates = self.order, ts.done, call.gates
        for step in steps:
            name, kind = step.name, step.kind
            kind_name = kind.name
            parse = outcome.parses[name]
            outputs = parse.outputs
            ts.outputs[name] = outputs
            for value in outputs.values():  # a plain loop: any() over a generator costs more
                if value is not None:
                    at = order.get(name, self.last)
                    if at >= ts.reach:  # done in plan order (`_did`, inline)
                        done[name] = outputs
                        ts.reach = at
                    else:
                        self._did(ts, name, outputs)
                    break
            status = "fallback" if name in fallbacks else ("failed" if parse.missing else "ran")
            if after_gates:
                expression = after_gates.get(name)
                if expression:
                    off = (gated_off.decided(name, ts.ctx if seen is None else seen[0], ts.outputs)
                           if gated_off is not None else None)
                    if off is None:
                        off = not self._when_open(name, expression, ts, seen, kind_name)
                    if off:
                        status = "gated"
            flags = parse.flags + tuple(f"missing <{t}>" for t in parse.missing) if parse.missing else parse.flags
            if applies and (status == "ran" or status == "fallback"):
                changes = kind.changes(name, outputs, change_ctx)
                if changes.memory:  # labelled with the step, kind and turn when the commit gathers them
                    ts.labels[name] = kind_name
                ts.changes[name] = changes
                if changes.flags:
                    flags += changes.flags
                if changes.state:
                    ts.ctx = ts.ctx.changed(state={**ts.ctx.state, **changes.state})
            ts.steps.append(StepTrace(name, kind_name, status, outputs, flags, gates[name], per_step_ms))
            if ts.cognition is not None and status != "gated":
                ts.cognition.record(name, status == "ran", per_step_ms, outputs)
            if emit is not None:
                emit(StepFinished(name, dict(outputs), status in ("ran", "fallback")))
