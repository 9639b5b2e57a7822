"""Drawing a compiled plan: plain text, Mermaid and Graphviz DOT, with call groups visible."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soul.compiler.graph import StepGraph
    from soul.compiler.plan import Plan, ScopePlan

FORMATS = ("text", "mermaid", "dot")


def _scopes(plan: Plan) -> list[tuple[str, ScopePlan, StepGraph]]:
    """(title, plan, graph) of every scope, the turn first."""
    g = plan.graph
    out = [("turn", plan.turn, g.turn)]
    out += [(f"subprocess {n}", sp, g.subprocesses[n]) for n, sp in plan.subprocesses.items()]
    out += [(f"process {n}", sp, g.processes[n]) for n, sp in plan.processes.items()]
    return out


def plan_text(plan: Plan) -> str:
    """The stable text form: scopes, layers, units and their steps with gates."""
    bp = plan.blueprint
    lines = [f"soul {bp.name} — mode {bp.mode}, model {bp.model}"]
    for title, sp, graph in _scopes(plan):
        calls = len(sp.calls())
        lines.append(f"{title}: {len(sp.steps)} steps, {calls} model call{'s' if calls != 1 else ''}")
        units = {u.index: u for u in sp.units}
        width = max((len(n) for n in sp.steps), default=0)
        for depth, layer in enumerate(sp.layers, start=1):
            lines.append(f"  layer {depth}")
            for index in layer:
                unit = units[index]
                lines.append(f"    {unit.label()}")
                for name in unit.steps:
                    ps = sp.steps[name]
                    after = sorted(graph.dag.predecessors(name), key=list(graph.dag.nodes).index)
                    extras = [ps.kind]
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


def _id(scope: str, name: str) -> str:
    return (scope.replace(":", "_") + "__" + name).replace(".", "_")


def mermaid(plan: Plan) -> str:
    """A Mermaid flowchart: each model call a subgraph, gates on the edges' targets."""
    lines = ["flowchart TD", "  input([input])"]
    for _title, sp, graph in _scopes(plan):
        scope = sp.scope
        for unit in sp.units:
            if unit.is_call:
                lines.append(f'  subgraph {_id(scope, f"call{unit.index}")}["{scope} · {unit.label()}"]')
            for name in unit.steps:
                ps = sp.steps[name]
                label = f"{name}<br/><i>{ps.kind}</i>"
                if ps.gate:
                    label += f"<br/>{ps.gate.describe()}"
                label = label.replace('"', "'")
                lines.append(f'    {_id(scope, name)}["{label}"]')
            if unit.is_call:
                lines.append("  end")
        for a, b in graph.dag.edges:
            lines.append(f"  {_id(scope, a)} --> {_id(scope, b)}")
        if scope == "turn":
            for name in graph.dag.nodes:
                if graph.dag.in_degree(name) == 0:
                    lines.append(f"  input --> {_id(scope, name)}")
        elif scope.startswith("subprocess:"):
            for name in graph.dag.nodes:
                if graph.dag.in_degree(name) == 0:
                    lines.append(f"  input -. after the reply .-> {_id(scope, name)}")
    return "\n".join(lines) + "\n"


def dot(plan: Plan) -> str:
    """Graphviz DOT: each model call a cluster."""
    lines = [f'digraph "{plan.blueprint.name}" {{', "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];', '  input [shape=oval];']
    for _title, sp, _graph in _scopes(plan):
        scope = sp.scope
        for unit in sp.units:
            indent = "  "
            if unit.is_call:
                lines.append(f'  subgraph "cluster_{_id(scope, str(unit.index))}" {{')
                lines.append(f'    label="{scope} · {unit.label()}"; style=rounded;')
                indent = "    "
            for name in unit.steps:
                ps = sp.steps[name]
                label = f"{name}\\n{ps.kind}" + (f"\\n{ps.gate.describe()}" if ps.gate else "")
                label = label.replace('"', "'")
                lines.append(f'{indent}"{_id(scope, name)}" [label="{label}"];')
            if unit.is_call:
                lines.append("  }")
    for _title, _sp, graph in _scopes(plan):
        sid = graph.scope
        for a, b in graph.dag.edges:
            lines.append(f'  "{_id(sid, a)}" -> "{_id(sid, b)}";')
        for name in graph.dag.nodes:
            if graph.dag.in_degree(name) == 0 and not sid.startswith("process:"):
                style = "" if sid == "turn" else " [style=dashed, label=\"after the reply\"]"
                lines.append(f'  input -> "{_id(sid, name)}"{style};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(plan: Plan, fmt: str) -> str:
    """The plan in one of FORMATS."""
    if fmt == "text":
        return plan_text(plan)
    if fmt == "mermaid":
        return mermaid(plan)
    if fmt == "dot":
        return dot(plan)
    raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
