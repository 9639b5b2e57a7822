"""Services: what running a plan needs besides the plan itself.

A turn runs from `(plan, services)`: the plan says what to do (steps bound to their kinds,
units, gates); the services are the collaborators that do it — the prompt builder and the gate
evaluator (built from the blueprint once), the model providers, the memory bridge, and
Chetana's starter. A Soul builds its services once and hands them to its sessions; `soul
explain` builds dry ones (no providers, no memory) and walks the same turn code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from soul.compiler import CallPlan, Plan, ScopePlan, Unit
from soul.providers import PriceTable, Provider
from soul.runtime.bridges import Cognition, Kept, MemoryBridge, reads_whole_context
from soul.runtime.conversation import Budget, budget_for
from soul.runtime.tools import ToolBox
from soul.runtime.turn.calls import BoundCall, CallShape
from soul.runtime.turn.gates import GateEvaluator
from soul.runtime.turn.prompting.not_run import NotRun, not_run_steps
from soul.runtime.turn.prompting.prompt import PromptBuilder

# model slot name or provider spec -> (provider, provider spec, options)
ProviderResolver = Callable[[str], tuple[Provider, str, dict[str, Any]]]
# (the session's saved controller state or None, the input text, the controller the
# session's last turn kept or None) -> the turn's Cognition
ChetanaStart = Callable[[Mapping[str, Any] | None, str, Kept | None], Cognition]


@dataclass(frozen=True)
class ScopeRuns:
    """What every run of one scope shares: `not_run`, every step a template or gate of the
    scope may name as it reads before (or without) running — a NotRun (a subprocess also
    reads the turn's steps); `order`, each of those steps' place in plan order; and `units`,
    each unit that asks for all its steps by number, with its call plan and what that plan is
    bound to (`Services.bind`), filled by the runner as each unit first runs; `walk`, each
    layer with its unit when the layer is one call asking for all its steps (no gate: the
    runner calls it straight, untraced) else None. Never changed but for `units`, which only grows."""

    scope: ScopePlan
    not_run: dict[str, NotRun]
    order: dict[str, int]
    units: dict[int, tuple[CallPlan, BoundCall]]
    walk: tuple[tuple[tuple[int, ...], Unit | None], ...]


class Gates(Protocol):
    """Decides `when` expressions (a GateEvaluator; a dry run leaves them open)."""

    def when_open(self, step: str, expression: str | None, variables: Mapping[str, Any], kind: str | None = None) -> bool: ...

    def reads(self, expression: str) -> frozenset[str] | None:
        """The variables `expression` needs (None: all of them)."""
        ...


@dataclass(frozen=True)
class Services:
    """The collaborators a turn uses; `providers`, `memory` or `chetana` is None where a run
    has none (a dry run calls no model; a soul without a `chetana:` block starts no controller)."""

    builder: PromptBuilder
    gates: Gates
    providers: ProviderResolver | None = None
    memory: MemoryBridge | None = None
    chetana: ChetanaStart | None = None
    tools: ToolBox | None = None  # the blueprint's tools, imported on first use (runtime/tools/box.py)
    prices: PriceTable | None = None  # what calls cost (providers/prices.py); None: the data home's table
    # each call plan bound once to its provider and grammar (see `bind`)
    _bound: dict[CallPlan, BoundCall] = field(default_factory=dict, init=False, repr=False, compare=False)
    # what every run of a scope shares (see `scoped`)
    _scopes: dict[int, ScopeRuns] = field(default_factory=dict, init=False, repr=False, compare=False)
    # one object per distinct budget: the calls of a turn on one slot share it, and the prompt
    # fitter works out what a budget leaves once per turn and budget object (`Fitter.fit`)
    _budgets: dict[Budget, Budget] = field(default_factory=dict, init=False, repr=False, compare=False)

    def provider(self, model: str) -> tuple[Provider, str, dict[str, Any]]:
        """The provider, provider spec and options of a model slot name or spec."""
        if self.providers is None:
            from soul.errors import RunError

            raise RunError(f"no model providers in this run: the call on '{model}' cannot be made")
        return self.providers(model)

    def scoped(self, plan: Plan, scope: ScopePlan) -> ScopeRuns:
        """What every run of `scope` shares, worked out on its first run (see `ScopeRuns`)."""
        found = self._scopes.get(id(scope))
        if found is None or found.scope is not scope:
            steps = not_run_steps(plan.turn.steps, scope.steps) if scope is not plan.turn else not_run_steps(scope.steps)
            lone = [scope.units[layer[0] - 1] if len(layer) == 1 else None for layer in scope.layers]
            walk = tuple((layer, unit if unit is not None and unit.model is not None and unit.index not in scope.gated else None)
                         for layer, unit in zip(scope.layers, lone, strict=True))
            found = self._scopes[id(scope)] = ScopeRuns(scope, steps, {name: i for i, name in enumerate(steps)}, {}, walk)
        return found

    def not_run(self, plan: Plan, scope: ScopePlan) -> dict[str, NotRun]:
        """Every step a template or gate of `scope` may name, as it reads before (or without)
        running: a NotRun (a subprocess also reads the turn's steps). Shared: never changed."""
        return self.scoped(plan, scope).not_run

    def bind(self, call: CallPlan) -> BoundCall:
        """What a call plan needs from these services, worked out on its first call (a slot's
        window and reserve are read then: a provider's `context_window` is fixed once made)."""
        bound = self._bound.get(call)
        if bound is None:
            provider, spec, options = self.provider(call.unit.model or "")
            grammar = None
            if getattr(provider, "wants_grammar", False):  # local models: constrained decoding
                from soul.sections import call_grammar

                # sections of steps whose gate is decided after the call may be left out
                grammar = call_grammar([(s.kind, s.params) for s in call.steps], set(call.optional))
            budget = budget_for(self.builder.blueprint, call.steps, spec, options, provider)
            budget = self._budgets.setdefault(budget, budget)
            # the table a soul was made with is fixed (without one, each call reads the data home's: call_cost)
            price = self.prices.price_for(provider.name, spec) if self.prices is not None else None
            shape = CallShape(call.steps)
            usual = not (call.after_gates or self.tools is not None or shape.echoing or shape.refusing)
            bound = self._bound[call] = BoundCall(provider, spec, options, shape, call.unit.index, call.tags,
                                                  call.stream_steps, call.attempts, grammar, budget, price, usual)
        return bound


def services_for(
    plan: Plan,
    *,
    providers: ProviderResolver | None = None,
    memory: MemoryBridge | None = None,
    gates: Gates | None = None,
    prices: PriceTable | None = None,
) -> Services:
    """The services a plan runs with: a prompt builder and a gate evaluator built from its
    blueprint, Chetana's starter when the blueprint enables Chetana, and what is passed in."""
    builder = PromptBuilder(plan.blueprint)
    block = plan.blueprint.chetana
    chetana = None
    if block is not None and block.get("enabled", True):
        chetana = partial(Cognition.begin, block, whole=reads_whole_context(plan, builder.template_reads))
    tools = ToolBox(plan.blueprint) if plan.blueprint.tools or plan.blueprint.mcp else None
    return Services(builder, gates or GateEvaluator(builder.env), providers, memory, chetana, tools, prices)
