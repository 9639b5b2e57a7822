"""A blueprint's MCP servers on the command line: `soul validate --tools`, `soul explain`'s
tools section, and `--allow-command`.

Plain `soul validate` and `soul explain` start nothing: they show each MCP entry as written
(its command or URL, lifetime, the tools it may use). With `--tools` the servers start — a
command only if the user allowed it — and each is asked for its tools; the tools the soul may
use are shown with their descriptions and JSON Schemas (checked), and what does not fit (a
server that will not start, a `use:` name it does not list, a schema that is not JSON Schema)
is an error. The servers stop before the command returns.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from soul.cli.terminal import say

ALLOW_VERBS = ("run", "dialogue", "serve", "worker", "validate", "explain")  # --allow-command


def add_allow_command(sub: Any) -> None:
    """`--allow-command` on every verb that may start an MCP server."""
    for verb in ALLOW_VERBS:
        if verb in sub.choices:
            sub.choices[verb].add_argument(
                "--allow-command", action="append", metavar="COMMAND", default=None,
                help="let a blueprint's MCP entry run this command line (and any that starts with its words); "
                     "repeatable (also: SOUL_ALLOW_COMMANDS, $SOUL_HOME/allowed-commands; docs/tools.md)")


def apply_allow_command(args: argparse.Namespace) -> None:
    entries = getattr(args, "allow_command", None)
    if entries:
        from soul.language import allow_commands

        allow_commands(entries)


def declared_lines(blueprint: Any) -> list[str]:
    """The MCP entries as written (nothing started)."""
    lines = []
    for server in blueprint.mcp.values():
        how = f"http {server.url}" if not server.stdio else f"stdio `{server.target}`"
        use = "every tool it lists" if server.use is None else ", ".join(server.use)
        lines.append(f"MCP server '{server.name}': {how} · lifetime {server.lifetime} · may use: {use}")
    return lines


def listed_lines(blueprint: Any) -> tuple[list[str], list[str]]:
    """Each server started and listed: (lines to print, errors). The servers stop here."""
    from soul.errors import SoulError
    from soul.runtime.tools import McpTools

    tools = McpTools(blueprint)
    lines: list[str] = []
    errors: list[str] = []
    try:
        for server in blueprint.mcp.values():
            try:
                tools.connect_sync(server)
            except SoulError as exc:
                errors.append(str(exc))
                continue
            listing = tools.listing(server)
            lines.append(f"MCP server '{server.name}' ({server.target}): {len(listing)} tool{'s' * (len(listing) != 1)} the soul may use")
            for tool in listing:
                lines.append(f"  {tool.name}: {tool.description.strip().splitlines()[0] if tool.description.strip() else '(no description)'}")
                lines.append(f"    arguments (JSON Schema): {json.dumps(tool.input_schema, ensure_ascii=False, sort_keys=True)}")
    finally:
        tools.close()
    return lines, errors


def print_tools(blueprint: Any, start: bool) -> int:
    """Print the MCP section; the number of errors."""
    if not blueprint.mcp:
        return 0
    if not start:
        for line in declared_lines(blueprint):
            say(line)
        return 0
    lines, errors = listed_lines(blueprint)
    for line in lines:
        say(line)

    for error in errors:
        say(f"error: {error}", err=True)
    return len(errors)
