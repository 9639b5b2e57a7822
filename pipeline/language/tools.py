"""Tools as written: the blueprint's `tools:` block and a step's `tools:` key, and finding a
tool's function *without running any code*.

`tools: {name: "module:function"}` or `{name: {ref: "module:function", timeout: S,
description: TEXT, max_chars: N}}` declares Python functions a model may call; `{name: {mcp:
COMMAND_OR_URL, use: [tools] | "*", ...}}` declares an MCP server and which of its tools the
model may call (`McpServerDecl`; started by soul.runtime.tools.mcp, never by validation). `soul validate`
must not run code from a blueprint it is asked to check (a cloned repository is hostile input
until the user runs it), so `locate_tool` looks for the module's file the way the import system
would — the blueprint's folder first, then `sys.path` — with `PathFinder`, which reads
directories and executes nothing, and reads its source to see whether it binds the name, the
way the import would (`soul.language.bindings`: star imports followed, every path counted).
What only running could show is a doubt, not an error. `soul run` imports the function
(soul.runtime.tools).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from soul.language.bindings import Bindings, find_module
from soul.language.sourcemap import KeyPath

DEFAULT_TIMEOUT = 30.0  # seconds a call may take before it is reported as timed out
DEFAULT_MAX_CHARS = 8000  # of a result shown to the model; the rest is cut, and the cut said
DEFAULT_ROUNDS = 4  # tool rounds a call may take before it must answer

REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")  # what every provider accepts as a tool name


@dataclass(frozen=True)
class ToolDecl:
    """One declared tool: its name, `module:function`, and how it is called."""

    name: str
    ref: str
    path: KeyPath  # where it is written, for errors
    timeout: float = DEFAULT_TIMEOUT
    description: str = ""
    max_chars: int = DEFAULT_MAX_CHARS

    @property
    def module(self) -> str:
        return self.ref.partition(":")[0]

    @property
    def attribute(self) -> str:
        return self.ref.partition(":")[2]


@dataclass(frozen=True)
class StepTools:
    """A step's `tools:` key: the tools its call may use and how many rounds it may take."""

    names: tuple[str, ...]
    rounds: int = DEFAULT_ROUNDS


Lifetime = Literal["process", "session"]
DEFAULT_START_TIMEOUT = 30.0  # seconds an MCP server may take to start and answer `initialize`


@dataclass(frozen=True)
class McpServerDecl:
    """One MCP server a blueprint names: a stdio command (`command`, run in the blueprint's
    folder) or a Streamable HTTP `url`; the tools of it the model may call (`use`: None means
    every tool it lists — `"*"`, or no `use:` at all); how long one server lives (`process`: shared by every
    session of the process; `session`: one per session, for servers that keep state)."""

    name: str
    path: KeyPath
    command: tuple[str, ...] = ()
    url: str = ""
    use: tuple[str, ...] | None = None
    lifetime: Lifetime = "process"
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    start_timeout: float = DEFAULT_START_TIMEOUT
    max_chars: int = DEFAULT_MAX_CHARS

    @property
    def stdio(self) -> bool:
        return not self.url

    @property
    def target(self) -> str:
        """The command line or URL, for messages."""
        return self.url or shlex.join(self.command)


def mcp_target(value: Any) -> tuple[tuple[str, ...], str] | None:
    """An entry's `mcp:` value as (command, url): a string starting with http:// or https://
    is a URL, any other string a command line (split as a POSIX shell would, nothing
    expanded), a list the command's arguments, a mapping `{command, args}` or `{url}` (the
    shape MCP clients' configurations use); None when it is none of these."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower().startswith(("http://", "https://")):
            return (), text
        try:
            argv = tuple(shlex.split(text))
        except ValueError:
            return None
        return (argv, "") if argv else None
    if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
        return tuple(value), ""
    if isinstance(value, dict):  # the MCP clients' own shape: {command, args} or {url}
        if isinstance(value.get("url"), str):
            return mcp_target(value["url"]) if value["url"].lower().startswith(("http://", "https://")) else None
        args = value.get("args", [])
        if isinstance(value.get("command"), str) and value["command"] and isinstance(args, list) and all(isinstance(a, str) for a in args):
            return (value["command"], *args), ""
    return None


def build_mcp_servers(raw: Any) -> dict[str, McpServerDecl]:
    """The MCP entries of the `tools:` block; malformed ones (the schema reports them) skipped."""
    servers: dict[str, McpServerDecl] = {}
    if not isinstance(raw, dict):
        return servers
    for name, value in raw.items():
        if not isinstance(value, dict) or "mcp" not in value:
            continue
        target = mcp_target(value["mcp"])
        if target is None:
            continue
        use_raw = value.get("use", "*")  # no `use:`: every tool the server lists (docs/tools.md says why)
        use = tuple(u for u in use_raw if isinstance(u, str)) if isinstance(use_raw, list) else None
        env_raw = value.get("env")
        env = tuple((k, v) for k, v in env_raw.items() if isinstance(k, str) and isinstance(v, str)) if isinstance(env_raw, dict) else ()
        servers[name] = McpServerDecl(
            name, ("tools", name), target[0], target[1], use,
            "session" if value.get("lifetime") == "session" else "process", env,
            _positive(value.get("timeout"), DEFAULT_TIMEOUT),
            _positive(value.get("start_timeout"), DEFAULT_START_TIMEOUT),
            int(_positive(value.get("max_chars"), DEFAULT_MAX_CHARS)),
        )
    return servers


def _positive(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else default


def build_tools(raw: Any) -> dict[str, ToolDecl]:
    """The `tools:` block as ToolDecls; malformed entries (the schema reports them) are skipped."""
    tools: dict[str, ToolDecl] = {}
    if not isinstance(raw, dict):
        return tools
    for name, value in raw.items():
        path = ("tools", name)
        if isinstance(value, str):
            tools[name] = ToolDecl(name, value, path)
        elif isinstance(value, dict) and isinstance(value.get("ref"), str):
            timeout, chars = value.get("timeout"), value.get("max_chars")
            tools[name] = ToolDecl(
                name, value["ref"], path,
                float(timeout) if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0 else DEFAULT_TIMEOUT,
                value["description"] if isinstance(value.get("description"), str) else "",
                chars if isinstance(chars, int) and not isinstance(chars, bool) and chars > 0 else DEFAULT_MAX_CHARS,
            )
    return tools


def build_step_tools(raw: Any) -> StepTools | None:
    """A step's `tools:` key: a list of names, or `{use: [names], rounds: N}`."""
    if isinstance(raw, list):
        return StepTools(tuple(n for n in raw if isinstance(n, str)))
    if isinstance(raw, dict):
        use = raw.get("use")
        rounds = raw.get("rounds")
        names = tuple(n for n in use if isinstance(n, str)) if isinstance(use, list) else ()
        ok = isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 1
        return StepTools(names, rounds if ok else DEFAULT_ROUNDS)  # type: ignore[arg-type]
    return None


@dataclass(frozen=True)
class ToolFinding:
    """What validation finds about where a tool points: an error (`proven`: the module is
    missing or binds no such name on any path) or a warning (it could not be proven either way
    without running code)."""

    message: str
    proven: bool
    hint: str


def locate_tool(decl: ToolDecl, folder: Path | None, bindings: Bindings | None = None) -> ToolFinding | None:
    """What is wrong, or unproven, about where `decl` points, found without running code
    (`soul.language.bindings`); None when the module binds the name. Pass one `bindings` for
    a blueprint's tools: each module is then read once, within one budget."""
    first = decl.attribute.split(".")[0]
    spec = find_module(decl.module, folder) if decl.module not in sys.modules else None
    if spec is None and decl.module not in sys.modules:
        where = f"the blueprint's folder ({folder}) or the Python path" if folder is not None else "the Python path"
        return ToolFinding(f"module '{decl.module}' is not found in {where}", True,
                           "put the module beside the blueprint, or install it; `soul run` imports it")
    binding = (bindings or Bindings(folder)).binds(decl.module, first)
    if binding.found:
        return None
    if binding.found is False:
        origin = spec.origin if spec is not None else getattr(sys.modules[decl.module], "__file__", None) or "loaded"
        return ToolFinding(f"module '{decl.module}' ({origin}) defines no '{first}'", True,
                           "no path through the module (nor the modules it star-imports) binds it; `soul run` imports it")
    return ToolFinding(
        f"could not be proven that module '{decl.module}' binds '{first}': {binding.why}", False,
        f"soul validate runs no code; `soul run` imports the module and stops at its FILE:LINE:COL if the name is "
        f"missing. To have it proven here, point the tool at a .py module beside the blueprint that imports it by "
        f"name: `from {decl.module} import {first}`")
