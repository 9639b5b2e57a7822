"""Drawing a compiled plan: plain text (the plan's own `text()`), Mermaid and Graphviz DOT, with
call groups visible."""

from __future__ import annotations

from soul.compiler.plan import Plan, plan_text

FORMATS = ("text", "mermaid", "dot")


def _id(scope: str, name: str) -> str:
    return (scope.replace(":", "_") + "__" + name).replace(".", "_")


def mermaid(plan: Plan) -> str:
    """A Mermaid flowchart: each model call a subgraph, gates on the edges' targets."""
    lines = ["flowchart TD", "  input([input])"]
    for _title, sp, graph in plan.scopes():
        scope = sp.scope
        for unit in sp.units:
            if unit.is_call:
                lines.append(f'  subgraph {_id(scope, f"call{unit.index}")}["{scope} · {unit.label()}"]')
            for name in unit.steps:
                ps = sp.steps[name]
                label = f"{name}<br/><i>{ps.kind.name}</i>"
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
    for _title, sp, _graph in plan.scopes():
        scope = sp.scope
        for unit in sp.units:
            indent = "  "
            if unit.is_call:
                lines.append(f'  subgraph "cluster_{_id(scope, str(unit.index))}" {{')
                lines.append(f'    label="{scope} · {unit.label()}"; style=rounded;')
                indent = "    "
            for name in unit.steps:
                ps = sp.steps[name]
                label = f"{name}\\n{ps.kind.name}" + (f"\\n{ps.gate.describe()}" if ps.gate else "")
                label = label.replace('"', "'")
                lines.append(f'{indent}"{_id(scope, name)}" [label="{label}"];')
            if unit.is_call:
                lines.append("  }")
    for _title, _sp, graph in plan.scopes():
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
