"""Plan: the compiled, ordered form of a Graph that the runtime executes.

A scope's steps are grouped into *units*: an LLM call group (fused: several steps answered as
XML sections of one call; chained: one step per call) or a single step that calls no model.
Units are ordered in topological layers; the units of a layer are independent and run
concurrently. Gates say when a step runs: `every` and a `when` that reads only earlier units
are decided before the call; a `when` that reads a step of the same fused call is decided after
it, on the parsed reply (the section is asked for, its effects apply only if the gate is true).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from soul.compiler.graph import Graph, StepGraph, build_graph
from soul.kinds import Registry
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
    name: str
    kind: str
    llm: bool
    model: str | None
    gate: Gate | None
    stream: bool
    retry: Retry
    template: str | None
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


@dataclass(frozen=True)
class ScopePlan:
    """The plan of one scope: units in layers, and each step's place."""

    scope: str
    units: tuple[Unit, ...]
    layers: tuple[tuple[int, ...], ...]
    steps: dict[str, PlannedStep] = field(default_factory=dict)

    def calls(self) -> list[Unit]:
        return [u for u in self.units if u.is_call]


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

    def text(self) -> str:
        """A stable, printable form of the plan."""
        from soul.compiler.drawing import plan_text

        return plan_text(self)


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


def _plan_scope(sg: StepGraph, fused: bool) -> ScopePlan:
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
            name, node.kind.name, node.llm, node.model, gate, step.stream, step.retry, step.template, unit_of[name]
        )
    return ScopePlan(sg.scope, units, layers, steps)


def compile_graph(graph: Graph) -> Plan:
    """Graph → Plan."""
    fused = graph.blueprint.mode == "fused"
    return Plan(
        graph.blueprint,
        graph,
        _plan_scope(graph.turn, fused),
        {name: _plan_scope(sg, fused) for name, sg in graph.subprocesses.items()},
        {name: _plan_scope(sg, False) for name, sg in graph.processes.items()},
    )


def compile_blueprint(source: str | Path | Blueprint, registry: Registry | None = None) -> Plan:
    """Blueprint (or a file / built-in name) → Graph → Plan; raises BlueprintInvalid."""
    if not isinstance(source, Blueprint):
        from soul.compiler.validation import load_valid

        source = load_valid(source, registry)
    return compile_graph(build_graph(source, registry))
