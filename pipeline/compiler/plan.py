"""Plan: the compiled, ordered form of a Graph that the runtime executes.

A scope's steps are grouped into *units*: an LLM call group (fused: several steps answered as
XML sections of one call; chained: one step per call) or a single step that calls no model.
Units are ordered in topological layers; the units of a layer are independent and run
concurrently. Gates say when a step runs: `every` and a `when` that reads only earlier units
are decided before the call; a `when` that reads a step of the same fused call is decided after
it, on the parsed reply (the section is asked for, its effects apply only if the gate is true).

The plan is bound: each step carries its kind class, `with:` values, template and gate, and a
subprocess's scope carries its own gate, so a turn runs from the plan and its services alone —
no blueprint or registry look-ups while it runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from soul.compiler.graph import Graph, StepGraph, build_graph
from soul.kinds import Registry, StepKind
from soul.language import Blueprint, Retry

GatePhase = Literal["before", "after"]


@dataclass(frozen=True)
class Gate:
    """When a step runs: on every Nth turn, and/or when an expression is true."""

    every: int | None = None
    when: str | None = None
    phase: GatePhase = "before"

    def describe(self) -> str:
        parts = []
        if self.every:
            parts.append(f"every {self.every}")
        if self.when:
            parts.append(f"when {self.when}" + (" (after the call)" if self.phase == "after" else ""))
        return ", ".join(parts)


@dataclass(frozen=True)
class PlannedStep:
    """A step bound for running: its kind class, `with:` values, template and gate."""

    name: str
    kind: type[StepKind]
    params: Mapping[str, Any]
    template: str | None
    gate: Gate | None
    llm: bool
    model: str | None
    stream: bool
    retry: Retry
    unit: int


@dataclass(frozen=True)
class Unit:
    """One thing the runtime does: a model call over `steps`, or one non-LLM step."""

    index: int
    steps: tuple[str, ...]
    model: str | None  # None: no model call
    fused: bool = False

    @property
    def is_call(self) -> bool:
        return self.model is not None

    def label(self) -> str:
        if not self.is_call:
            return f"step {self.steps[0]}"
        how = "fused call" if self.fused else "call"
        return f"{how} {self.index} [{self.model}]"


# Identity, not value, is a call plan's hash: the runtime keys what it binds to one (provider, grammar) by it.
@dataclass(frozen=True, eq=False)
class CallPlan:
    """A model call over the steps of a unit that run this turn: all of it the plan fixes."""

    unit: Unit
    steps: tuple[PlannedStep, ...]
    tags: tuple[str, ...]  # every section asked for, in order
    stream_steps: tuple[str, ...]
    attempts: int  # the first try plus re-asks: the most any step's `retry` allows
    after_gates: dict[str, str]  # step -> its `when`, decided on the parsed reply
    gates: dict[str, str | None]  # each step's gate, described for the trace
    optional: frozenset[int]  # positions of steps whose sections a reply may leave out
    # The call as errors name it: `the call of steps think, reply on main`. Set when made, not a
    # `cached_property`: that writes the instance's `__dict__`, after which CPython 3.11 reads
    # none of the plan's fields by its fast path (the runtime reads them on every call).
    where: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", f"the call of step{'s' if len(self.steps) > 1 else ''} "
                                          f"{', '.join(s.name for s in self.steps)} on {self.unit.model}")


@dataclass(frozen=True)
class ScopePlan:
    """The plan of one scope: units in layers, each step's place, and (for a subprocess) the
    gate that decides whether the scope runs after a turn."""

    scope: str
    units: tuple[Unit, ...]
    layers: tuple[tuple[int, ...], ...]
    steps: dict[str, PlannedStep] = field(default_factory=dict)
    gate: Gate | None = None
    # call plans by (unit, steps that run): a pure function of the plan, worked out once
    _calls: dict[tuple[int, tuple[str, ...]], CallPlan] = field(default_factory=dict, init=False, repr=False, compare=False)
    _whole: dict[int, CallPlan] = field(default_factory=dict, init=False, repr=False, compare=False)
    # the units with a step that has a gate (the others run every step, every turn)
    gated: frozenset[int] = field(init=False, repr=False, compare=False)

    def calls(self) -> list[Unit]:
        return [u for u in self.units if u.is_call]

    def __post_init__(self) -> None:
        # set when made, not a `cached_property` (see `CallPlan.where`)
        object.__setattr__(self, "gated", frozenset(u.index for u in self.units
                                                    if any(self.steps[name].gate is not None for name in u.steps)))

    def unit(self, index: int) -> Unit:
        """The unit numbered `index` (units are numbered from 1 in order)."""
        return self.units[index - 1]

    def call_plan(self, unit: Unit, active: tuple[str, ...]) -> CallPlan:
        """The call of `unit` asking for the steps `active` (those whose gates let them run);
        one object per (unit, steps), which the runtime keys what it binds to it by."""
        if active is unit.steps:  # every step of the unit (no gate closed): found by the unit alone
            plan = self._whole.get(unit.index)
            if plan is None:
                plan = self._whole[unit.index] = self._planned(unit, active)
            return plan
        return self._planned(unit, active)

    def _planned(self, unit: Unit, active: tuple[str, ...]) -> CallPlan:
        key = (unit.index, active)
        plan = self._calls.get(key)
        if plan is None:
            steps = tuple(self.steps[name] for name in active)
            after = {s.name: s.gate.when for s in steps if s.gate and s.gate.when and s.gate.phase == "after"}
            plan = self._calls[key] = CallPlan(
                unit=unit,
                steps=steps,
                tags=tuple(section.tag for s in steps for section in s.kind.sections),
                stream_steps=tuple(s.name for s in steps if s.stream),
                attempts=1 + max(s.retry.attempts for s in steps),
                after_gates=after,
                gates={s.name: s.gate.describe() if s.gate else None for s in steps},
                optional=frozenset(i for i, s in enumerate(steps) if s.name in after),
            )
        return plan


@dataclass(frozen=True)
class Plan:
    """The compiled soul: what runs each turn, after it, and in the background."""

    blueprint: Blueprint
    graph: Graph
    turn: ScopePlan
    subprocesses: dict[str, ScopePlan]
    processes: dict[str, ScopePlan]

    @property
    def mode(self) -> str:
        return self.blueprint.mode

    def initial_state(self, stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The soul state a turn starts from: each declared key's default, overlaid by the
        `stored` values of declared keys (a new session stores the defaults alone)."""
        declared = self.blueprint.state
        state = {key: var.default for key, var in declared.items()}
        if stored:
            state.update((key, value) for key, value in stored.items() if key in declared)
        return state

    def scopes(self) -> Iterator[tuple[str, ScopePlan, StepGraph]]:
        """(title, plan, graph) of every scope, the turn first."""
        g = self.graph
        yield "turn", self.turn, g.turn
        for name, sp in self.subprocesses.items():
            yield f"subprocess {name}", sp, g.subprocesses[name]
        for name, sp in self.processes.items():
            yield f"process {name}", sp, g.processes[name]

    def text(self) -> str:
        """A stable, printable form of the plan (also `soul graph --format text`)."""
        return plan_text(self)


def plan_text(plan: Plan) -> str:
    """The stable text form: scopes, layers, units and their steps with gates."""
    bp = plan.blueprint
    lines = [f"soul {bp.name} — mode {bp.mode}, model {bp.model}"]
    for title, sp, graph in plan.scopes():
        calls = len(sp.calls())
        lines.append(f"{title}: {len(sp.steps)} steps, {calls} model call{'s' if calls != 1 else ''}")
        width = max((len(n) for n in sp.steps), default=0)
        for depth, layer in enumerate(sp.layers, start=1):
            lines.append(f"  layer {depth}")
            for index in layer:
                unit = sp.unit(index)
                lines.append(f"    {unit.label()}")
                for name in unit.steps:
                    ps = sp.steps[name]
                    after = sorted(graph.dag.predecessors(name), key=list(graph.dag.nodes).index)
                    extras = [ps.kind.name]
                    if ps.stream:
                        extras.append("stream")
                    if ps.gate:
                        extras.append(ps.gate.describe())
                    if after:
                        extras.append("after " + ", ".join(after))
                    lines.append(f"      {name.ljust(width)}  " + " · ".join(extras))
    for name, trig in bp.triggers.items():
        lines.append(f"trigger {name}: {trig.kind}" + (f" from {trig.options['source']}" if "source" in trig.options else ""))
    return "\n".join(lines) + "\n"


def _group_calls(sg: StepGraph, order: list[str], fused: bool) -> list[list[str]]:
    """Split steps into units, in topological order (see module docstring)."""
    import networkx as nx

    ancestors = {n: nx.ancestors(sg.dag, n) for n in order}
    units: list[list[str]] = []
    for name in order:
        node = sg.node(name)
        joined = False
        if fused and node.llm:
            for unit in reversed(units):
                head = sg.node(unit[0])
                if not head.llm or head.model != node.model:
                    continue
                members = set(unit)
                # joining is safe when nothing outside the unit lies between it and this step
                between = {a for a in ancestors[name] if a not in members and ancestors[a] & members}
                if not between:
                    unit.append(name)
                    joined = True
                break
        if not joined:
            units.append([name])
    return units


def _plan_scope(sg: StepGraph, fused: bool, scope_gate: Gate | None = None) -> ScopePlan:
    import networkx as nx

    position = {name: i for i, name in enumerate(sg.dag.nodes)}
    # file order wherever dependencies allow: a fused call asks for its sections in this order
    order = list(nx.lexicographical_topological_sort(sg.dag, key=position.__getitem__))
    grouped = _group_calls(sg, order, fused)
    units = tuple(
        Unit(i + 1, tuple(members), sg.node(members[0]).model, fused and sg.node(members[0]).llm)
        for i, members in enumerate(grouped)
    )
    unit_of = {name: u.index for u in units for name in u.steps}
    contracted = nx.DiGraph()
    contracted.add_nodes_from(u.index for u in units)
    for a, b in sg.dag.edges:
        if unit_of[a] != unit_of[b]:
            contracted.add_edge(unit_of[a], unit_of[b])
    layers = tuple(tuple(sorted(layer)) for layer in nx.topological_generations(contracted))
    steps = {}
    for name in order:
        node = sg.node(name)
        step = node.step
        gate = None
        if step.every or step.when:
            phase: Literal["before", "after"] = "before"
            if step.when and fused:
                from soul.language import analyse_expression

                same_call = {r.name for r in analyse_expression(step.when).refs if r.root == "steps"}
                if any(unit_of.get(s) == unit_of[name] for s in same_call):
                    phase = "after"
            gate = Gate(step.every, step.when, phase)
        steps[name] = PlannedStep(
            name, node.kind, step.params, step.template, gate, node.llm, node.model, step.stream, step.retry, unit_of[name]
        )
    return ScopePlan(sg.scope, units, layers, steps, scope_gate)


def compile_graph(graph: Graph) -> Plan:
    """Graph → Plan."""
    bp = graph.blueprint
    fused = bp.mode == "fused"
    subprocesses = {}
    for name, sg in graph.subprocesses.items():
        sub = bp.subprocesses[name]
        # whether the subprocess runs after a turn: decided before it, like a step's gate
        gate = Gate(sub.every, sub.when) if sub.every or sub.when else None
        subprocesses[name] = _plan_scope(sg, fused, gate)
    return Plan(
        bp,
        graph,
        _plan_scope(graph.turn, fused),
        subprocesses,
        # a cycle is one call in fused mode, as the seed's single S_model call
        {name: _plan_scope(sg, fused) for name, sg in graph.processes.items()},
    )


def compile_blueprint(source: str | Path | Blueprint, registry: Registry | None = None) -> Plan:
    """Blueprint (or a file / built-in name) → Graph → Plan; raises BlueprintInvalid."""
    if not isinstance(source, Blueprint):
        from soul.compiler.validation import load_valid

        source = load_valid(source, registry)
    return compile_graph(build_graph(source, registry))
