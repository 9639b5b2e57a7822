"""`soul explain`: a dry run of the first turn — the exact prompt of every model call, with token
counts, and no provider called.

The dry run walks the real turn code (`turn.ScopeRunner`: the same layers, units and gates)
from a new session's snapshot, with nothing real done: a step that makes no model call yields
placeholders instead of running, a model call records its prompt and yields placeholders
(⟨steps.think.text⟩), and no change applies. A `when` decided before a call reads outputs a
dry run does not have, so it counts as open and is listed as decided at run time. Chetana's
context comes from the services, as in a real turn.

Each call is fitted to its budget as in a real turn (the slot's window and reply reserve,
`runtime/conversation/budget.py`), and the explanation shows it: the window, what is kept for the reply,
what the prompt may take and what these very messages take as the budget counts them (the
tokens shown above them, and the chat template's markers), and anything cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from soul.compiler import CallPlan, Gate, Plan, PlannedStep, Unit
from soul.providers import Message
from soul.records import SessionInfo, Snapshot
from soul.runtime.conversation import MESSAGE_OVERHEAD, TOKENIZER, Budget, budget_for, count_tokens
from soul.runtime.events import CallTrace
from soul.runtime.turn import (
    CallOutcome,
    GatedOff,
    Prompt,
    ScopeRunner,
    Seen,
    Services,
    TurnState,
    services_for,
    start_turn,
)
from soul.sections import Instructions, StepParse

TOKENIZER_NOTE = "tokens counted with the SmolLM2 tokenizer of the bundled local model"
__all__ = ["DryRun", "ExplainedCall", "count_tokens", "dry_services", "explain", "first_snapshot", "render"]


class Placeholder(str):
    """The not-yet-known output of a step, as templates see it in a dry run."""

    __slots__ = ()


@dataclass(frozen=True)
class ExplainedCall:
    unit: Unit
    steps: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (step, why)
    after_gates: tuple[tuple[str, str], ...]  # (step, expression) decided on the reply
    messages: tuple[Message, ...]
    tokens: tuple[int, ...]
    budget: dict[str, Any] | None = None  # window, reserve, counter, fixed, used, parts
    cut: tuple[dict[str, Any], ...] = ()
    counted: int | None = None  # these messages as the budget counts them (markers included)


def placeholders(step: PlannedStep) -> dict[str, Any]:
    """Every output of `step` as a placeholder naming it."""
    return {o: Placeholder(f"⟨steps.{step.name}.{o}⟩") for o in step.kind.output_names()}


class UndecidedGates:
    """A dry run's `when` gates: open, since they read outputs that only a real turn has."""

    def when_open(self, step: str, expression: str | None, variables: Mapping[str, Any], kind: str | None = None) -> bool:
        return True

    def reads(self, expression: str) -> frozenset[str]:
        return frozenset()  # it decides on nothing


class DryRun(ScopeRunner):
    """The turn's walk with nothing real done: placeholders for outputs, no changes."""

    applies_changes = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counted: dict[int, int] = {}  # unit -> its messages as its budget counts them

    async def step_outputs(self, step: PlannedStep, ts: TurnState, seen: Seen | None = None) -> dict[str, Any]:
        return placeholders(step)

    def budget(self, call: CallPlan) -> Budget:
        """The call's budget from the blueprint alone: its slot's spec and options (no provider
        is resolved; the model `--model`/`SOUL_MODEL` would pick is not known here)."""
        bp = self.plan.blueprint
        model = call.unit.model or bp.model
        slot = bp.models.get(model)
        spec, options = (slot.provider, slot.options) if slot else (model, {})
        return budget_for(bp, call.steps, spec, options)

    async def ask(self, call: CallPlan, prompt: Prompt, gated_off: GatedOff | None,
                  budget: Budget | None = None, instructions: Instructions | None = None) -> CallOutcome:
        parses = {s.name: StepParse(placeholders(s), (), ()) for s in call.steps}
        messages = prompt.messages
        if budget is not None:
            self.counted[call.unit.index] = budget.counter.messages([m.content for m in messages])
        names = tuple(s.name for s in call.steps)
        trace = CallTrace(call.unit.index, call.unit.model or "", names, messages, "", 0, 0, 0, 0.0)
        if prompt.budget is not None:  # the prompt's record of its budget; no call was made, so no cost
            trace.budget, trace.cut, trace.window = prompt.budget, tuple(prompt.cut or ()), prompt.layout
        return CallOutcome(parses, frozenset(), trace, False)


def dry_services(plan: Plan) -> Services:
    """Services for a dry run of `plan`: the real prompt builder and Chetana's starter; no
    providers, no memory, and `when` gates left open."""
    return services_for(plan, gates=UndecidedGates())


def first_snapshot(plan: Plan, user: str) -> Snapshot:
    """What a new session's first turn starts from: nothing stored but the initial state."""
    info = SessionInfo(id="", soul=plan.blueprint.name, user=user, turns=0, created=0.0, updated=0.0, blueprint=plan.blueprint.file)
    return Snapshot(info, plan.initial_state(), "", 0, (), (), None, None)


def _skip_reason(gate: Gate | None) -> str:
    """Why a step did not run on the first turn: in a dry run, only `every` skips a step."""
    if gate is None or not gate.every:
        return "its gate is closed"
    return f"every {gate.every}: runs on turns {gate.every}, {2 * gate.every}, ..."


def explain(plan: Plan, message: str, user: str = "user", services: Services | None = None) -> list[ExplainedCall]:
    """The model calls of the first turn of `plan` on `message`, in execution order.

    `services` are a Soul's (`Soul.services`) or `dry_services(plan)`; either way nothing real
    is done and every `when` stays open."""
    if services is None:
        services = dry_services(plan)
    elif not isinstance(services.gates, UndecidedGates):
        services = replace(services, gates=UndecidedGates())
    ts = start_turn(plan, services, first_snapshot(plan, user), message, "message")
    runner = DryRun(plan, plan.turn, services)
    asyncio.run(runner.run(ts))
    status = {trace.step: trace.status for trace in ts.steps}
    steps = plan.turn.steps
    calls = []
    for call in ts.calls:
        unit = plan.turn.unit(call.unit)
        skipped = tuple((name, _skip_reason(steps[name].gate)) for name in unit.steps if status.get(name) == "skipped")
        after_gates = []
        for name in call.steps:
            gate = steps[name].gate
            if gate and gate.when:
                decided = "" if gate.phase == "after" else " (decided before the call, at run time)"
                after_gates.append((name, gate.when + decided))
        tokens = tuple(count_tokens(m.content) for m in call.messages)
        calls.append(ExplainedCall(unit, call.steps, skipped, tuple(after_gates), tuple(call.messages), tokens,
                                   call.budget, tuple(call.cut), runner.counted.get(call.unit)))
    return calls


def render(plan: Plan, message: str, calls: list[ExplainedCall]) -> str:
    """The text `soul explain` prints."""
    bp = plan.blueprint
    out = [f'soul {bp.name} — first turn, mode {bp.mode}, message: "{message}"']
    total = 0
    for n, call in enumerate(calls, start=1):
        how = "fused" if call.unit.fused else "single step"
        out.append("")
        out.append(f"═══ call {n} of {len(calls)} · {how} · model {call.unit.model} · steps {', '.join(call.steps)}")
        for name, why in call.skipped:
            out.append(f"    skipped: {name} ({why})")
        for name, expr in call.after_gates:
            out.append(f"    gate: {name} applies only when {expr}")
        for message_, tokens in zip(call.messages, call.tokens, strict=True):
            out.append(f"─── {message_.role} · {tokens} tokens")
            out.append(message_.content)
        out.append(f"─── {sum(call.tokens)} tokens in")
        out.extend(_budget_lines(call))
        total += sum(call.tokens)
    out.append("")
    out.append(f"{len(calls)} model call{'s' if len(calls) != 1 else ''}, {total} prompt tokens in all ({TOKENIZER_NOTE})")
    return "\n".join(out) + "\n"


def _budget_lines(call: ExplainedCall) -> list[str]:
    """The call's budget as `soul explain` shows it, and what was cut to keep within it."""
    budget = call.budget
    if budget is None:
        return []
    prompt = budget["window"] - budget["reserve"]
    head = f"─── budget: window {budget['window']} tokens, {budget['reserve']} kept for the reply, so the prompt may take {prompt}"
    markers = f"{MESSAGE_OVERHEAD} a message for the chat template's markers"
    if call.counted is None:
        lines = [head]
    elif budget["counter"] == TOKENIZER:  # the same tokenizer as the counts above: they add up
        lines = [f"{head}; it takes {call.counted} (the {sum(call.tokens)} above and {markers})"]
    else:
        lines = [f"{head}; it takes {call.counted} as budgeted with the {budget['counter']} ({markers} included; "
                 "the counts above are the bundled tokenizer's)"]
    for cut in call.cut:
        lines.append(f"    cut: {cut['part']}: {cut['what']} ({cut['why']})")
    return lines
