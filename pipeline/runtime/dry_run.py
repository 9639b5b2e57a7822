"""`soul explain`: a dry run of the first turn — the exact prompt of every model call, with token
counts, and no provider called.

Outputs of steps that have not run are shown as placeholders (⟨steps.think.text⟩); gates that
depend on them are listed as decided at run time.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from soul.compiler import Plan, ScopePlan, Unit
from soul.kinds import default_registry
from soul.runtime.prompt import CallStep, Message, PromptBuilder, TurnContext

TOKENIZER_NOTE = "tokens counted with the SmolLM2 tokenizer of the bundled local model"


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


@cache
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    raw = files("soul.data").joinpath("smollm2-tokenizer.json.gz").read_bytes()
    return Tokenizer.from_str(gzip.decompress(raw).decode("utf-8"))


def count_tokens(text: str) -> int:
    """Tokens of `text` for the bundled local model."""
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def _skip_reason(plan_scope: ScopePlan, name: str, turn: int) -> str | None:
    gate = plan_scope.steps[name].gate
    if gate and gate.every and turn % gate.every != 0:
        return f"every {gate.every}: runs on turns {gate.every}, {2 * gate.every}, ..."
    return None


def explain(plan: Plan, message: str, user: str = "user") -> list[ExplainedCall]:
    """The model calls of the first turn of `plan` on `message`, in execution order."""
    bp = plan.blueprint
    registry = default_registry()
    builder = PromptBuilder(bp)
    state = {k: v.default for k, v in bp.state.items()}
    known: dict[str, dict[str, str]] = {}
    calls: list[ExplainedCall] = []
    chetana = None
    if bp.chetana is not None and bp.chetana.get("enabled", True):
        from soul.runtime.chetana import Cognition  # a fresh controller: what the first turn sees

        chetana = Cognition.begin(bp.chetana, None, message).context
    scope = plan.turn
    units = {u.index: u for u in scope.units}
    for layer in scope.layers:
        for index in layer:
            unit = units[index]
            active, skipped, after_gates = [], [], []
            for name in unit.steps:
                why = _skip_reason(scope, name, 1)
                ps = scope.steps[name]
                if why:
                    skipped.append((name, why))
                elif ps.gate and ps.gate.when and ps.gate.phase == "after":
                    after_gates.append((name, ps.gate.when))
                    active.append(name)
                elif ps.gate and ps.gate.when:
                    after_gates.append((name, ps.gate.when + " (decided before the call, at run time)"))
                    active.append(name)
                else:
                    active.append(name)
            for name in unit.steps:
                kind = registry.get(scope.steps[name].kind)
                assert kind is not None
                known[name] = {o: Placeholder(f"⟨steps.{name}.{o}⟩") for o in kind.output_names()}
            if not unit.is_call or not active:
                continue
            call_steps = []
            for name in active:
                step = bp.steps[name]
                kind = registry.get(step.uses)
                assert kind is not None
                call_steps.append(CallStep(name, kind, step.params, step.template))
            earlier = {n: v for n, v in known.items() if n not in unit.steps}
            ctx = TurnContext(text=message, user=user, number=1, state=state, steps=earlier, chetana=chetana)
            messages = builder.build(call_steps, ctx)
            tokens = tuple(count_tokens(m.content) for m in messages)
            calls.append(ExplainedCall(unit, tuple(active), tuple(skipped), tuple(after_gates), messages, tokens))
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
        total += sum(call.tokens)
    out.append("")
    out.append(f"{len(calls)} model call{'s' if len(calls) != 1 else ''}, {total} prompt tokens in all ({TOKENIZER_NOTE})")
    return "\n".join(out) + "\n"
