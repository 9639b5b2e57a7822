"""Running a turn: a Plan + a session snapshot + an input → a TurnResult and a Commit.

Units run layer by layer; the units of a layer run concurrently (asyncio). Before a unit, its
steps' `every` and before-phase `when` gates decide which steps it asks for; after a fused
call, after-phase gates decide whether a step's changes apply. Nothing is written here: the
turn's changes are gathered into one `Commit` that the session store applies atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from soul.compiler import ScopePlan, Unit
from soul.errors import StepError
from soul.kinds import ChangeContext, Changes, StepEnv
from soul.records import Commit, MemoryEntry, MessageRecord, Snapshot, UserModelChange
from soul.runtime.calls import run_call
from soul.runtime.chetana import Cognition
from soul.runtime.eager import gather_eagerly
from soul.runtime.events import StepFinished, StepStarted, StepTrace, Trace
from soul.runtime.gates import every_open
from soul.runtime.prompt import CallStep, TurnContext

if TYPE_CHECKING:
    from soul.runtime.souls import Soul


@dataclass
class TurnState:
    """What accumulates while a turn runs (private to one turn)."""

    ctx: TurnContext
    outputs: dict[str, dict[str, Any]]
    steps: list[StepTrace] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)
    changes: dict[str, Changes] = field(default_factory=dict)
    provider_s: float = 0.0
    cognition: Cognition | None = None
    done: dict[str, dict[str, Any]] = field(default_factory=dict)  # outputs of the steps that produced some
    session: str | None = None  # the session's id, for engines that prime by session


def _memory_regions(entries: tuple[MemoryEntry, ...]) -> dict[str, list[str]]:
    regions: dict[str, list[str]] = {}
    for entry in entries:
        regions.setdefault(entry.region, []).append(entry.content)
    return regions


def context_for(soul: Soul, snapshot: Snapshot, text: str, kind: str) -> TurnContext:
    """The TurnContext a turn starts from."""
    bp = soul.blueprint
    number = snapshot.session.turns + 1
    state = {k: v.default for k, v in bp.state.items()} | {k: v for k, v in snapshot.state.items() if k in bp.state}
    # Samantha-Dreams: the user model goes in on the first turn, then only after a true check
    inject = snapshot.session.turns == 0 or snapshot.last_user_model_check is True
    return TurnContext(
        text=text,
        user=snapshot.session.user,
        kind=kind,
        number=number,
        state=state,
        user_model=snapshot.user_model,
        inject_user_model=inject,
        memory=_memory_regions(snapshot.memory),
    )


class ScopeRunner:
    """Runs the units of one scope (the turn, or a subprocess) against a TurnState."""

    def __init__(self, soul: Soul, scope: ScopePlan, steps: Mapping[str, Any], emit: Callable[[Any], None] | None) -> None:
        self.soul = soul
        self.scope = scope
        self.blueprint_steps = steps
        self.emit = emit

    def _emit(self, event: Any) -> None:
        if self.emit is not None:
            self.emit(event)

    def variables(self, ts: TurnState, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.soul.builder.variables(replace(ts.ctx, steps=ts.outputs), params)

    async def run(self, ts: TurnState) -> None:
        units = self.soul.units_by_index(self.scope)
        for layer in self.scope.layers:
            if len(layer) == 1:  # no task needed for a lone unit: a chain pays no scheduling
                await self.run_unit(units[layer[0]], ts)
            else:
                await gather_eagerly([self.run_unit(units[i], ts) for i in layer])

    async def run_unit(self, unit: Unit, ts: TurnState) -> None:
        planned = self.scope.steps
        active = []
        for name in unit.steps:
            gate = planned[name].gate
            if not every_open(gate, ts.ctx.number):
                ts.steps.append(StepTrace(name, planned[name].kind, "skipped", {}, gate=gate.describe() if gate else None))
                continue
            if gate and gate.when and gate.phase == "before" and not self.soul.gates.when_open(name, gate.when, self.variables(ts)):
                ts.steps.append(StepTrace(name, planned[name].kind, "gated", {}, gate=gate.describe()))
                continue
            active.append(name)
        if not active:
            return
        if unit.is_call:
            await self.run_llm_unit(unit, active, ts)
        else:
            for name in active:
                await self.run_local_step(name, ts)

    async def run_local_step(self, name: str, ts: TurnState) -> None:
        """A step that makes no model call (Chetana, memory): its kind computes the outputs."""
        step = self.blueprint_steps[name]
        kind = self.soul.registry.get(step.uses)
        assert kind is not None
        self._emit(StepStarted(name, kind.name))
        started = time.perf_counter()
        variables = self.variables(ts, step.params)
        soul = self.soul

        def render(source: str) -> str:
            return soul.builder.env.from_string(source).render(variables)

        env = StepEnv(variables, render, soul.memory.reader, soul.blueprint.memory or {}, ts.ctx.text, ts.session)
        try:
            outputs = await kind.run(name, step.params, env)
        except NotImplementedError as exc:
            raise StepError(f"step '{name}': {exc}") from exc
        ms = (time.perf_counter() - started) * 1000
        ts.outputs[name] = outputs
        ts.done[name] = outputs
        changes = kind.changes(name, outputs, ChangeContext(self.soul.blueprint.state, ts.ctx.state))
        ts.changes[name] = changes
        if changes.regions:  # working memory for the rest of this turn's prompts
            ts.ctx = replace(ts.ctx, memory={**ts.ctx.memory, **changes.regions})
        ts.steps.append(StepTrace(name, kind.name, "ran", dict(outputs), tuple(changes.flags), ms=ms))
        if ts.cognition is not None:
            ts.cognition.record(name, True, ms, outputs)
        self._emit(StepFinished(name, dict(outputs), True))

    def call_spec(self, unit: Unit, active: tuple[str, ...]) -> CallSpec:
        """What a unit's call needs that never changes between turns (cached on the Soul)."""
        key = (self.scope.scope, unit.index, active)
        spec = self.soul.call_specs.get(key)
        if spec is None:
            soul = self.soul
            call_steps = []
            for name in active:
                step = self.blueprint_steps[name]
                kind = soul.registry.get(step.uses)
                assert kind is not None
                call_steps.append(CallStep(name, kind, step.params, step.template))
            provider, model, options = soul.provider_for(unit.model or soul.blueprint.model)
            planned = self.scope.steps
            spec = CallSpec(
                steps=tuple(call_steps),
                provider=provider,
                model=model,
                options=options,
                stream_steps=tuple(n for n in active if planned[n].stream),
                attempts=1 + max(planned[n].retry.attempts for n in active),
                after_gates={n: g.when for n in active if (g := planned[n].gate) and g.when and g.phase == "after"},
                tags=tuple(section.tag for step in call_steps for section in step.kind.sections),
                gates={n: g.describe() if (g := planned[n].gate) else None for n in active},
                grammar=self._grammar(provider, call_steps, active),
            )
            soul.call_specs[key] = spec
        return spec

    def _grammar(self, provider: Any, call_steps: list[CallStep], active: tuple[str, ...]) -> str | None:
        """A GBNF grammar for providers that constrain decoding; sections of steps whose gate
        is decided after the call may be left out (no update after a false check)."""
        if not getattr(provider, "wants_grammar", False):
            return None
        from soul.sections import call_grammar

        planned = self.scope.steps
        optional = {i for i, n in enumerate(active) if (g := planned[n].gate) and g.when and g.phase == "after"}
        return call_grammar([(s.kind, s.params) for s in call_steps], optional)

    async def run_llm_unit(self, unit: Unit, active: list[str], ts: TurnState) -> None:
        soul = self.soul
        spec = self.call_spec(unit, tuple(active))
        if self.emit is not None:
            for step in spec.steps:
                self.emit(StepStarted(step.name, step.kind.name))
        messages = soul.builder.build(spec.steps, ts.ctx, ts.done)
        gated_off = None
        if spec.after_gates:

            def gated_off(name: str, parses: dict[str, Any]) -> bool:
                expression = spec.after_gates.get(name)
                if expression is None:
                    return False
                trial = {**ts.outputs, **{n: p.outputs for n, p in parses.items()}}
                return not soul.gates.when_open(name, expression, soul.builder.variables(replace(ts.ctx, steps=trial)))

        started = time.perf_counter()
        outcome = await run_call(
            spec.provider, spec.model, spec.options, spec.steps, messages,
            unit=unit.index, stream_steps=spec.stream_steps, emit=self.emit, attempts=spec.attempts, gated_off=gated_off,
            tags=spec.tags, grammar=spec.grammar,
        )
        ts.provider_s += time.perf_counter() - started
        ts.calls.append(outcome.trace)
        change_ctx = ChangeContext(soul.blueprint.state, ts.ctx.state)
        per_step_ms = outcome.trace.latency_ms / len(spec.steps)
        for step in spec.steps:
            parse = outcome.parses[step.name]
            ts.outputs[step.name] = parse.outputs
            if any(v is not None for v in parse.outputs.values()):
                ts.done[step.name] = parse.outputs
            status = "fallback" if step.name in outcome.fallbacks else ("failed" if parse.missing else "ran")
            expression = spec.after_gates.get(step.name)
            if expression and not soul.gates.when_open(step.name, expression, self.variables(ts)):
                status = "gated"
            flags = parse.flags + tuple(f"missing <{t}>" for t in parse.missing) if parse.missing else parse.flags
            if status in ("ran", "fallback"):
                changes = step.kind.changes(step.name, parse.outputs, change_ctx)
                ts.changes[step.name] = changes
                flags += changes.flags
                if changes.state:
                    ts.ctx = replace(ts.ctx, state={**ts.ctx.state, **changes.state})
            ts.steps.append(StepTrace(step.name, step.kind.name, status, parse.outputs, flags, spec.gates[step.name], per_step_ms))
            if ts.cognition is not None and status != "gated":
                ts.cognition.record(step.name, status == "ran", per_step_ms, parse.outputs)
            if self.emit is not None:
                self.emit(StepFinished(step.name, dict(parse.outputs), status in ("ran", "fallback")))


@dataclass(frozen=True)
class CallSpec:
    """The unchanging part of a unit's model call."""

    steps: tuple[CallStep, ...]
    provider: Any
    model: str
    options: dict[str, Any]
    stream_steps: tuple[str, ...]
    attempts: int
    after_gates: dict[str, str]
    tags: tuple[str, ...]
    gates: dict[str, str | None]  # each step's gate, described for the trace
    grammar: str | None = None  # GBNF for providers that constrain decoding


def build_commit(soul: Soul, snapshot: Snapshot, ts: TurnState, order: list[str], kind: str, trace: Trace) -> tuple[Commit, str]:
    """The turn's Commit and its reply, from the accumulated changes in plan order."""
    messages: list[MessageRecord] = []
    memory: list[MemoryEntry] = []
    if kind == "message":
        messages.append(MessageRecord("external", "user", ts.ctx.text, meta={"user": ts.ctx.user}))
        memory.append(MemoryEntry("default", "userMessage", ts.ctx.text))
    state_changed = False
    user_model: UserModelChange | None = None
    reply_parts: list[str] = []
    for name in order:
        changes = ts.changes.get(name)
        if changes is None:
            continue
        messages.extend(changes.messages)
        memory.extend(changes.memory)
        state_changed = state_changed or bool(changes.state)
        user_model = changes.user_model or user_model
        if changes.reply:
            reply_parts.append(changes.reply)
    commit = Commit(
        session_id=snapshot.session.id,
        base_turn=snapshot.session.turns,
        messages=tuple(messages),
        state=dict(ts.ctx.state) if state_changed else None,
        user_model=user_model,
        memory=tuple(memory),
        trace=trace.to_dict(),
        kind=kind,  # type: ignore[arg-type]
    )
    return commit, "\n\n".join(reply_parts)


def memory_items(soul: Soul, ts: TurnState, order: list[str], reply: str, kind: str) -> list[dict[str, Any]]:
    """What to write to the memory field once the turn has committed: memory.store requests
    (an empty content means the exchange) and what the `memory.store` block asks for."""
    exchange = f"{ts.ctx.user}: {ts.ctx.text}\n{soul.name}: {reply}".strip() if kind == "message" else reply
    items: list[dict[str, Any]] = []
    for name in order:
        changes = ts.changes.get(name)
        for item in changes.remember if changes else ():
            items.append({**item, "text": item["text"] or exchange})
    block = soul.blueprint.memory
    if block is None or block.get("enabled", True) is False:
        return items
    wanted = block.get("store") or {}
    if wanted.get("episodes") and kind == "message" and reply:
        items.append({"text": exchange, "kind": "episode", "source": "turn"})
    if wanted.get("corrections") and ts.cognition is not None and ts.cognition.correction:
        items.append({"text": f"{ts.ctx.user} corrected {soul.name}: {ts.ctx.text}", "kind": "correction", "source": "user"})
    if wanted.get("user_facts"):
        for name in order:
            changes = ts.changes.get(name)
            if changes is not None and changes.user_model is not None:
                items.append({"text": f"About {ts.ctx.user}: {changes.user_model.note}", "kind": "preference", "source": "user_model"})
    return items
