"""The compiler: every rule checked in one pass (`validate`), the step graph (networkx,
built only for blueprints that passed), the `Plan` the runtime executes, and its drawings.

Modules, each importing only those before it: topology → references → validation → graph →
plan → drawing.

Imports the language and the step kinds; never the runtime, providers or engines, so
`soul validate` stays fast and the compiler is testable alone.
"""

from soul.compiler.drawing import FORMATS, draw
from soul.compiler.graph import Graph, Node, StepGraph, build_graph
from soul.compiler.plan import (
    CallPlan,
    Gate,
    Plan,
    PlannedStep,
    ScopePlan,
    Unit,
    compile_blueprint,
    compile_graph,
    plan_text,
)
from soul.compiler.validation import Checked, load_valid, validate

__all__ = [
    "FORMATS",
    "CallPlan",
    "Checked",
    "Gate",
    "Graph",
    "Node",
    "Plan",
    "PlannedStep",
    "ScopePlan",
    "StepGraph",
    "Unit",
    "build_graph",
    "compile_blueprint",
    "compile_graph",
    "draw",
    "load_valid",
    "plan_text",
    "validate",
]
