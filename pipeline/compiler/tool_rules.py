"""The rules of tools (docs/tools.md), checked in validation's one pass.

Each tool of the `tools:` block points at a module that exists and binds the function on
some path — found without running any of it (`soul.language.locate_tool`): validating a
blueprint never executes code it names. What only running could show (a compiled module, a
module `__getattr__`) is a warning saying the name could not be proven, and how to prove it. A step's `tools:` names declared tools
and sits on a step that calls a model; a `tool` step has tools to choose from, and the one its
`with: tool:` names is among them. A declared tool no step can reach is a warning.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from soul.diagnostics import did_you_mean, one_of
from soul.kinds import Registry
from soul.language import Bindings, Blueprint, KeyPath, Step, locate_tool

TOOL_KIND = "tool"


class Reporter(Protocol):
    """What the rules report through (validation's `_Rules`)."""

    bp: Blueprint
    registry: Registry

    def error(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...

    def warning(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...


def check_tools(rules: Reporter) -> None:
    """Every tool rule, reported through `rules` at the blueprint's positions."""
    bp = rules.bp
    bindings = Bindings(bp.folder)  # each module read once for all the tools
    for decl in bp.tools.values():
        finding = locate_tool(decl, bp.folder, bindings)
        if finding is not None:
            at = _first_written(bp, (*decl.path, "ref"), decl.path)
            report = rules.error if finding.proven else rules.warning
            report(at, f"tool '{decl.name}': {finding.message}", finding.hint)
    reached: set[str] = set()
    for step in _all_steps(bp):
        reached |= _check_step(rules, step)
    for name, decl in bp.tools.items():
        if name not in reached:
            rules.warning(decl.path, f"tool '{name}' is never used: no step lists it and no `tool` step may choose it", key=True)


def _check_step(rules: Reporter, step: Step) -> set[str]:
    """The step's tool rules; the tools it may use."""
    bp = rules.bp
    kind = rules.registry.get(step.uses)
    is_tool_step = kind is not None and kind.name == TOOL_KIND
    usable: set[str] = set()
    if step.tools is not None:
        if kind is not None and not kind.llm:
            rules.error((*step.path, "tools"), f"step kind '{kind.name}' makes no model call; `tools` has no effect here")
        for i, name in enumerate(step.tools.names):
            if name in bp.tools:
                usable.add(name)
            else:
                rules.error(_item(bp, step, i), f"step '{step.name}' lists an undeclared tool '{name}'",
                            did_you_mean(name, bp.tools) or f"declared tools: {one_of(bp.tools)}")
    elif is_tool_step:
        usable = set(bp.tools)  # a `tool` step without `tools:` may choose any declared tool
    if is_tool_step:
        if not bp.tools:
            rules.error((*step.path, "uses"), f"step '{step.name}' is a `tool` step but the blueprint declares no tools",
                        "add a top-level `tools:` block: `tools: {name: module:function}`")
        chosen = step.params.get("tool")
        if isinstance(chosen, str) and chosen not in usable and chosen in bp.tools:
            rules.error((*step.path, "with", "tool"), f"tool '{chosen}' is not among the tools step '{step.name}' lists",
                        f"add it to the step's `tools:` ({', '.join(sorted(usable)) or 'none'})")
        elif isinstance(chosen, str) and chosen not in bp.tools:
            rules.error((*step.path, "with", "tool"), f"step '{step.name}' calls an undeclared tool '{chosen}'",
                        did_you_mean(chosen, bp.tools) or f"declared tools: {one_of(bp.tools)}")
    return usable


def _item(bp: Blueprint, step: Step, i: int) -> KeyPath:
    return _first_written(bp, (*step.path, "tools", i), (*step.path, "tools", "use", i), (*step.path, "tools"))


def _all_steps(bp: Blueprint) -> Iterable[Step]:
    yield from bp.steps.values()
    for sp in bp.subprocesses.values():
        yield from sp.steps.values()
    for pr in bp.processes.values():
        yield from pr.steps.values()


def _first_written(bp: Any, *paths: KeyPath) -> KeyPath:
    """The first of `paths` the source map has a position for (else the last)."""
    values = bp.source.values
    return next((p for p in paths if p in values), paths[-1])
