"""Gates: deciding whether a step runs this turn (`every`) and whether it applies (`when`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from soul.compiler import Gate, PlannedStep
from soul.errors import StepError
from soul.language import analyse_expression
from soul.runtime.turn.context import TurnContext, TurnState

# What evaluating a sandboxed expression can raise besides jinja2's own errors, e.g. comparing
# None (an output of a step that did not run) with a number: a user's mistake, never a crash.
EXPRESSION_ERRORS: tuple[type[Exception], ...] = (TypeError, ValueError, ArithmeticError, LookupError, AttributeError)


def every_open(gate: Gate | None, turn: int) -> bool:
    """`every: N` runs on turns N, 2N, 3N, ... (the Claudius seed's `count % N == 0`)."""
    return gate is None or not gate.every or turn % gate.every == 0


class GateEvaluator:
    """Compiles each `when` once (in the sandbox) and evaluates it against a turn's variables."""

    def __init__(self, env: ImmutableSandboxedEnvironment) -> None:
        self.env = env
        self._compiled: dict[str, Callable[..., Any]] = {}
        self._reads: dict[str, frozenset[str] | None] = {}

    def reads(self, expression: str) -> frozenset[str] | None:
        """The names `expression` reads (`steps`, `state`, ...): the only variables it needs,
        since a name it does not read is never looked up (None: it does not parse, so it is
        given every variable and fails as it would with them)."""
        found = self._reads.get(expression, False)
        if found is False:
            analysis = analyse_expression(expression)
            found = self._reads[expression] = None if analysis.error is not None else analysis.names
        return found  # type: ignore[return-value]

    def when_open(self, step: str, expression: str | None, variables: Mapping[str, Any], kind: str | None = None) -> bool:
        """Whether `expression` (the `when` of `step`, of kind `kind`) is true on `variables`."""
        if not expression:
            return True
        fn = self._compiled.get(expression)
        try:
            if fn is None:
                fn = self.env.compile_expression(expression, undefined_to_none=False)
                self._compiled[expression] = fn
            return bool(fn(**variables))
        except (TemplateError, *EXPRESSION_ERRORS) as exc:
            raise StepError.from_exception(exc, step=step, kind=kind, what=f"its `when` ({expression}) failed") from exc


def after_the_call(builder: Any, gates: GateEvaluator, not_run: Mapping[str, Any], after_gates: Mapping[str, str],
                   planned: Mapping[str, PlannedStep], ts: TurnState, ctx: TurnContext) -> Callable[[str, dict[str, Any]], bool]:
    """`gated_off(step, parses)`: whether `step`'s after-the-call gate (`after_gates`) is closed
    on a reply's parses, read over `ctx` (the context the call's layer found) with the turn's
    outputs and the parses. A function of its own, not a closure in the runner's call: its
    cells would be made on every call, gated or not."""
    decided: dict[str, tuple[tuple[Any, ...], bool]] = {}  # per step: the parses it was decided on, and how

    def gated_off(name: str, parses: dict[str, Any]) -> bool:
        expression = after_gates.get(name)
        if expression is None:
            return False
        # a reply's checks ask about the same parses several times (missing, refusals, echoes): decided once
        read = (len(ts.outputs), *parses.values())
        known = decided.get(name)
        if known is not None and known[0] == read:
            return known[1]
        trial = {**not_run, **ts.outputs, **{n: p.outputs for n, p in parses.items()}}
        off = not gates.when_open(name, expression, builder.variables(ctx, None, trial, gates.reads(expression)),
                                  planned[name].kind.name)
        decided[name] = (read, off)
        return off

    return gated_off
