"""Gates: deciding whether a step runs this turn (`every`) and whether it applies (`when`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError, nodes
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from soul.compiler import Gate, PlannedStep
from soul.errors import StepError
from soul.language import analyse_expression, constant_key
from soul.runtime.turn.context import TurnContext, TurnState
from soul.runtime.turn.prompting.prompt import EVERY_NAME

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
        self._inputs: dict[str, tuple[frozenset[str], tuple[str, ...]] | None] = {}
        self._paths: dict[str, tuple[str, str] | None] = {}  # per compiled expression: `output_path`

    def reads(self, expression: str) -> frozenset[str] | None:
        """The names `expression` reads (`steps`, `state`, ...): the only variables it needs,
        since a name it does not read is never looked up (None: it does not parse, so it is
        given every variable and fails as it would with them)."""
        found = self._reads.get(expression, False)
        if found is False:
            analysis = analyse_expression(expression)
            found = self._reads[expression] = None if analysis.error is not None else analysis.names
        return found  # type: ignore[return-value]

    def inputs(self, expression: str) -> tuple[frozenset[str], tuple[str, ...]] | None:
        """What `expression`'s value is a function of: the context names it reads besides
        `steps`, and the steps it reads (`steps.x` or `steps['x']`, each by a constant name);
        None when that is not known — it reads `steps` otherwise (`steps[name]`, `steps|length`),
        a name no gate is given (a global such as `lipsum`), calls anything or filters at
        random, or does not parse. Found once per expression."""
        found = self._inputs.get(expression, False)
        if found is False:
            found = self._inputs[expression] = self._find_inputs(expression)
        return found  # type: ignore[return-value]

    def _find_inputs(self, expression: str) -> tuple[frozenset[str], tuple[str, ...]] | None:
        names = self.reads(expression)
        if names is None or not names <= EVERY_NAME:  # a name no gate is given (a global such as `lipsum`)
            return None
        try:
            tree = Parser(self.env, expression, state="variable").parse_expression()
        except TemplateSyntaxError:
            return None
        if any(isinstance(n, nodes.Call) or (isinstance(n, nodes.Filter) and n.name == "random")
               for n in tree.find_all((nodes.Call, nodes.Filter))):
            return None
        steps: list[str] = []
        for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
            inner = node.node
            if isinstance(inner, nodes.Name) and inner.name == "steps":
                key = constant_key(node)
                if key is None:
                    return None
                steps.append(key)
        reads_steps = sum(1 for n in tree.find_all(nodes.Name) if n.name == "steps")
        if reads_steps != len(steps):  # `steps` read whole somewhere
            return None
        return names - {"steps"}, tuple(dict.fromkeys(steps))

    def when_open(self, step: str, expression: str | None, variables: Mapping[str, Any], kind: str | None = None) -> bool:
        """Whether `expression` (the `when` of `step`, of kind `kind`) is true on `variables`."""
        if not expression:
            return True
        fn = self._compiled.get(expression)
        try:
            if fn is None:
                fn = self.env.compile_expression(expression, undefined_to_none=False)
                self._compiled[expression] = fn
                self._paths[expression] = output_path(self.env, expression)
            path = self._paths[expression]
            if path is not None:  # `steps.x.y` over a step's outputs holding `y`: what the sandbox reads
                steps = variables.get("steps")
                if type(steps) is dict:
                    outputs = steps.get(path[0])
                    if type(outputs) is dict and path[1] in outputs:
                        return bool(outputs[path[1]])
            return bool(fn(**variables))
        except (TemplateError, *EXPRESSION_ERRORS) as exc:
            raise StepError.from_exception(exc, step=step, kind=kind, what=f"its `when` ({expression}) failed") from exc


def output_path(env: ImmutableSandboxedEnvironment, expression: str) -> tuple[str, str] | None:
    """`(step, output)` when `expression` is one step's output and nothing else
    (`steps.check.result`, or with `['check']`), named by what no dict has as an attribute:
    over a dict of outputs holding it, the sandbox reads it as `outputs[output]` (its
    `getattr` falls back to the item only when the attribute does not exist). Anything else
    (a NotRun, a missing output, any other expression): None, and the sandbox evaluates it."""
    try:
        parser = Parser(env, expression, state="variable")
        node = parser.parse_expression()
        if parser.stream.current.type != "eof":
            return None
    except TemplateSyntaxError:
        return None
    keys: list[str] = []
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        key = constant_key(node)
        if key is None:
            return None
        keys.append(key)
        node = node.node
    if not (isinstance(node, nodes.Name) and node.name == "steps" and len(keys) == 2):
        return None
    output, step = keys
    if hasattr(dict, step) or hasattr(dict, output):
        return None
    return step, output


def after_the_call(builder: Any, gates: GateEvaluator, not_run: Mapping[str, Any], after_gates: Mapping[str, str],
                   planned: Mapping[str, PlannedStep], ts: TurnState, ctx: TurnContext) -> AfterTheCall:
    """`gated_off(step, parses)`: whether `step`'s after-the-call gate (`after_gates`) is closed
    on a reply's parses, read over `ctx` (the context the call's layer found) with the turn's
    outputs and the parses (`AfterTheCall`)."""
    return AfterTheCall(builder, gates, not_run, after_gates, planned, ts, ctx)


class AfterTheCall:
    """Called as `gated_off(step, parses)`: whether `step`'s after-the-call gate is closed on a
    reply's parses. A reply's checks ask about the same parses several times (missing,
    refusals, echoes): each step is decided once per parses. `decided` hands a decision on to
    the step's application (`ScopeRunner.apply`) when it is provably the one evaluating the gate
    again would make — the same expression over the very same values of what it reads. An
    object, not a closure in the runner's call: its cells would be made on every call."""

    __slots__ = ("_decided", "after_gates", "builder", "ctx", "gates", "not_run", "planned", "ts")

    def __init__(self, builder: Any, gates: GateEvaluator, not_run: Mapping[str, Any], after_gates: Mapping[str, str],
                 planned: Mapping[str, PlannedStep], ts: TurnState, ctx: TurnContext) -> None:
        self.builder, self.gates, self.not_run, self.after_gates = builder, gates, not_run, after_gates
        self.planned, self.ts, self.ctx = planned, ts, ctx
        # per step: the parses it was decided on, how, and the values of the steps its gate reads
        self._decided: dict[str, tuple[tuple[Any, ...], bool, tuple[Any, ...] | None]] = {}

    def __call__(self, name: str, parses: dict[str, Any]) -> bool:
        expression = self.after_gates.get(name)
        if expression is None:
            return False
        ts = self.ts
        read = (len(ts.outputs), *parses.values())
        known = self._decided.get(name)
        if known is not None and known[0] == read:
            return known[1]
        gates = self.gates
        trial = {**self.not_run, **ts.outputs, **{n: p.outputs for n, p in parses.items()}}
        off = not gates.when_open(name, expression, self.builder.variables(self.ctx, None, trial, gates.reads(expression)),
                                  self.planned[name].kind.name)
        inputs = gates.inputs(expression)
        self._decided[name] = (read, off, None if inputs is None else tuple(trial.get(s) for s in inputs[1]))
        return off

    def decided(self, name: str, ctx: TurnContext, steps: Mapping[str, Any]) -> bool | None:
        """Whether `name`'s gate is closed, as decided on the reply, when the gate now reads
        over `ctx` and `steps` (NotRun for a step not in them) exactly what it read then: the
        same context (when it reads more than the steps) and the same object for each step it
        reads; None when not decided or not provably the same."""
        known = self._decided.get(name)
        if known is None or known[2] is None:
            return None
        expression = self.after_gates[name]
        inputs = self.gates.inputs(expression)
        if inputs is None or (inputs[0] and ctx is not self.ctx):
            return None
        not_run = self.not_run
        for step, then in zip(inputs[1], known[2], strict=True):
            now = steps[step] if step in steps else not_run.get(step)
            if now is not then:
                return None
        return known[1]
