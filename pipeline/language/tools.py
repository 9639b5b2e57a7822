"""Tools as written: the blueprint's `tools:` block and a step's `tools:` key, and finding a
tool's function *without running any code*.

`tools: {name: "module:function"}` or `{name: {ref: "module:function", timeout: S,
description: TEXT, max_chars: N}}` declares Python functions a model may call. `soul validate`
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
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
