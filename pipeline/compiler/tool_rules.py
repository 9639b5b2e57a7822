"""The rules of tools (docs/tools.md), checked in validation's one pass.

Each tool of the `tools:` block points at a module that exists and binds the function on
some path — found without running any of it (`soul.language.locate_tool`): validating a
blueprint never executes code it names. What only running could show (a compiled module, a
module `__getattr__`) is a warning saying the name could not be proven, and how to prove it. A step's `tools:` names declared tools
and sits on a step that calls a model; a `tool` step has tools to choose from, and the one its
`with: tool:` names is among them. A declared tool no step can reach is a warning.

An MCP entry (`mcp:`) is checked without starting its server: a step may list the server (all
the tools its `use:` allows) or one of those tools by name; no two tools the model may see
share a name; a command the user has not allowed (soul.language.commands) or that is not on
the PATH is a warning — `soul validate --tools` starts the servers and checks what they list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from soul.diagnostics import did_you_mean, one_of
from soul.kinds import Registry
from soul.language import (
    Bindings,
    Blueprint,
    KeyPath,
    McpServerDecl,
    Step,
    command_allowed,
    how_to_allow,
    locate_tool,
)

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
    for server in bp.mcp.values():
        _check_server(rules, server)
    reached: set[str] = set()
    for step in _all_steps(bp):
        reached |= _check_step(rules, step)
    for name, decl in bp.tools.items():
        if name not in reached:
            rules.warning(decl.path, f"tool '{name}' is never used: no step lists it and no `tool` step may choose it", key=True)
    for name, server in bp.mcp.items():
        if name not in reached and not (set(server.use or ()) & reached):
            rules.warning(server.path, f"MCP server '{name}' is never used: no step lists it or its tools, and no `tool` step may choose them", key=True)


def mcp_tool_names(bp: Blueprint) -> dict[str, str]:
    """Each MCP tool a blueprint names in a `use:` list → its server's entry name."""
    return {tool: server.name for server in bp.mcp.values() for tool in (server.use or ())}


def _check_server(rules: Reporter, server: McpServerDecl) -> None:
    bp = rules.bp
    if server.use is None and (*server.path, "use") not in bp.source.values:
        rules.warning(server.path, f"MCP server '{server.name}' does not say which of its tools the soul may use: "
                      "every tool it lists is offered, including ones a new version of it adds",
                      "pin them with `use: [tool, ...]` (or write `use: \"*\"` to mean every tool)", key=True)
    for i, tool in enumerate(server.use or ()):
        clash = "a Python tool" if tool in bp.tools else "an entry of `tools:`" if tool in bp.mcp else None
        other = next((s.name for s in bp.mcp.values() if s.name != server.name and tool in (s.use or ())), None)
        if clash or other:
            rules.error((*server.path, "use", i), f"MCP server '{server.name}' offers a tool '{tool}', the name of "
                        f"{clash or f'a tool of MCP server {other!r}'}", "the model calls tools by name: no two may share one")
    if server.stdio:
        import shutil

        program = server.command[0]
        folder = bp.folder
        found = shutil.which(program) or (folder is not None and "/" in program and (folder / program).is_file())
        if not found:
            rules.warning((*server.path, "mcp"), f"MCP server '{server.name}': the command '{program}' is not on the PATH",
                          "install it (e.g. `pip install ...`) before `soul run`")
        if not command_allowed(server.command):
            rules.warning((*server.path, "mcp"), f"MCP server '{server.name}' runs `{server.target}`, which you have not allowed: "
                          "`soul run` refuses to start it", f"to allow it: {how_to_allow(server.command)}")


def _check_step(rules: Reporter, step: Step) -> set[str]:
    """The step's tool rules; the tools it may use."""
    bp = rules.bp
    kind = rules.registry.get(step.uses)
    is_tool_step = kind is not None and kind.name == TOOL_KIND
    usable: set[str] = set()
    mcp_tools = mcp_tool_names(bp)
    declared = [*bp.tools, *bp.mcp, *mcp_tools]
    open_servers = False  # a usable server with `use: "*"`: its tool names are known when it runs
    if step.tools is not None:
        if kind is not None and not kind.llm:
            rules.error((*step.path, "tools"), f"step kind '{kind.name}' makes no model call; `tools` has no effect here")
        for i, name in enumerate(step.tools.names):
            if name in bp.tools or name in mcp_tools:
                usable.add(name)
            elif name in bp.mcp:
                usable |= {name, *(bp.mcp[name].use or ())}
                open_servers |= bp.mcp[name].use is None
            else:
                rules.error(_item(bp, step, i), f"step '{step.name}' lists an undeclared tool '{name}'",
                            did_you_mean(name, declared) or f"declared tools: {one_of(declared)}")
    elif is_tool_step:
        usable = set(declared)  # a `tool` step without `tools:` may choose any declared tool
        open_servers = any(s.use is None for s in bp.mcp.values())
    if is_tool_step:
        if not bp.tools and not bp.mcp:
            rules.error((*step.path, "uses"), f"step '{step.name}' is a `tool` step but the blueprint declares no tools",
                        "add a top-level `tools:` block: `tools: {name: module:function}`")
        chosen = step.params.get("tool")
        known = chosen in bp.tools or chosen in mcp_tools
        if isinstance(chosen, str) and chosen not in usable and known:
            rules.error((*step.path, "with", "tool"), f"tool '{chosen}' is not among the tools step '{step.name}' lists",
                        f"add it to the step's `tools:` ({', '.join(sorted(usable)) or 'none'})")
        elif isinstance(chosen, str) and not known and not open_servers:
            callable_ = [*bp.tools, *mcp_tools]
            rules.error((*step.path, "with", "tool"), f"step '{step.name}' calls an undeclared tool '{chosen}'",
                        did_you_mean(chosen, callable_) or f"declared tools: {one_of(callable_)}")
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
