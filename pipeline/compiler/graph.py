"""Graph: a valid Blueprint as networkx DiGraphs of step nodes (the turn, subprocesses, processes).

Edges run from a step to the steps that follow it (`after`). Each node carries its `Node`: the
step as written, its kind, and the model it resolves to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from soul.kinds import Registry, StepKind, default_registry
from soul.language import Blueprint, Step

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True)
class Node:
    """A step in the compiled graph."""

    name: str
    step: Step
    kind: type[StepKind]
    model: str | None  # a slot name or provider string; None for steps that call no model

    @property
    def llm(self) -> bool:
        return self.kind.llm


@dataclass(frozen=True)
class StepGraph:
    """The steps of one scope ("turn", "subprocess:NAME", "process:NAME") and their edges."""

    scope: str
    dag: nx.DiGraph

    def node(self, name: str) -> Node:
        return self.dag.nodes[name]["node"]

    def nodes(self) -> list[Node]:
        return [data["node"] for _, data in self.dag.nodes(data=True)]


@dataclass(frozen=True)
class Graph:
    """The compiled graph of a soul."""

    blueprint: Blueprint
    turn: StepGraph
    subprocesses: dict[str, StepGraph] = field(default_factory=dict)
    processes: dict[str, StepGraph] = field(default_factory=dict)


def _step_graph(
    scope: str, steps: dict[str, Step], registry: Registry, default_model: str | None
) -> StepGraph:
    import networkx as nx

    dag = nx.DiGraph()
    for name, step in steps.items():
        kind = registry.get(step.uses)
        if kind is None:  # validation reports this; a Graph is only built from valid blueprints
            raise ValueError(f"unknown step kind '{step.uses}'")
        model = (step.model or default_model) if kind.llm else None
        dag.add_node(name, node=Node(name, step, kind, model))
    for name, step in steps.items():
        for dep in step.after:
            dag.add_edge(dep, name)
    return StepGraph(scope, dag)


def build_graph(blueprint: Blueprint, registry: Registry | None = None) -> Graph:
    """The Graph of a blueprint that has passed validation."""
    registry = registry or default_registry()
    turn = _step_graph("turn", blueprint.steps, registry, blueprint.model)
    subprocesses = {
        name: _step_graph(f"subprocess:{name}", sp.steps, registry, blueprint.model)
        for name, sp in sorted(blueprint.subprocesses.items())
    }
    processes = {
        name: _step_graph(f"process:{name}", pr.steps, registry, pr.model or blueprint.model)
        for name, pr in sorted(blueprint.processes.items())
    }
    return Graph(blueprint, turn, subprocesses, processes)
