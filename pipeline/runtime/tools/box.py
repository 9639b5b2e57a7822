"""The tools a soul's model may call: Python functions declared in the blueprint's `tools:`.

A `ToolBox` imports each function on first use (the blueprint's folder first, then the Python
path: running a soul runs its tools' code; validating it does not — soul.language.locate_tool),
derives the JSON Schema of its arguments from its signature and type hints (descriptions from
its docstring), and calls it: a coroutine function is awaited, any other function runs in a
daemon thread of its own (a hung tool can neither block the event loop nor keep the process
alive at exit), both under the tool's timeout. Whatever happens is data: arguments that are
not a JSON object or do not fit the signature, an exception, a timeout — each becomes a
`ToolRun` with an `error`, which the model reads; nothing here raises for a failed call.

A result is text for the model: a string as is, anything else as JSON; lone surrogates
replaced; cut at the tool's `max_chars` with the cut said. Recording and replaying: a
cassette's `tool_results` hold each run (`tape`); a replay serves the recorded result for the
same tool and arguments in recorded order, and runs the tool only for a call the tape lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import re
import sys
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from soul.errors import ToolLoadError
from soul.language import Blueprint, ToolDecl
from soul.providers import ToolSpec
from soul.runtime.surrogates import replace_lone_surrogates
from soul.runtime.tools.arguments import kept, read_arguments
from soul.runtime.tools.guard import ToolRaised, carried, guarded, guarded_call, worded
from soul.runtime.tools.mcp import McpBox, McpTools

MAX_ERROR_CHARS = 1000  # of an exception's text shown to the model
_IMPORT_LOCK = threading.Lock()  # sys.path is process-wide: one tool import at a time

TapeMode = Literal["record", "replay"]


@dataclass(frozen=True)
class ToolRun:
    """One call of a tool: what was asked, what came back (or what went wrong), how long."""

    id: str
    tool: str
    arguments: Any  # the parsed arguments (a mapping), or the text the model wrote
    result: str | None
    error: str | None
    ms: float
    source: str = "model"  # model | template (a `tool` step's `with: tool:`) | tape (replayed)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Tool:
    """A tool ready to call: its declaration, function, and the spec the model sees."""

    decl: ToolDecl
    function: Callable[..., Any]
    spec: ToolSpec
    signature: inspect.Signature


class ToolBox(McpBox):
    """The blueprint's tools, imported on first use."""

    def __init__(self, blueprint: Blueprint) -> None:
        self.blueprint = blueprint
        self.decls = blueprint.tools
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Any] = {}
        self.mcp = McpTools(blueprint) if blueprint.mcp else None  # its MCP servers (McpBox, tools/mcp.py)

    def get(self, name: str) -> Tool:
        """The tool `name`, imported now if it was not yet; ToolLoadError (at the blueprint's
        FILE:LINE:COL) when its module or function cannot be imported or described."""
        tool = self._tools.get(name)
        if tool is None and name not in self.decls and self.mcp is not None and name in self.mcp:
            decl, spec = self.mcp.describe(name)
            signature = inspect.Signature([inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD)])
            tool = self._tools[name] = Tool(decl, self.mcp.call, spec, signature)
        if tool is None:
            decl = self.decls[name]
            function = self._import(decl)
            signature, spec = describe(decl, function, self._where(decl))
            tool = self._tools[name] = Tool(decl, function, spec, signature)
        return tool

    def load_all(self) -> None:
        """Import every declared tool now (so a broken one fails before a turn)."""
        for name in self.decls:
            self.get(name)

    def _where(self, decl: ToolDecl) -> str:
        pos = self.blueprint.source.position(decl.path)
        return f"{self.blueprint.file}:{pos.line}:{pos.col}"

    def _import(self, decl: ToolDecl) -> Callable[..., Any]:
        where = self._where(decl)
        folder = str(self.blueprint.folder) if self.blueprint.folder is not None else None
        with _IMPORT_LOCK:
            added = folder is not None and folder not in sys.path
            if added:
                sys.path.insert(0, folder)  # the blueprint's folder first, as its docs say
            try:
                target: Any = guarded_call(importlib.import_module, decl.module)
            except Exception as exc:  # user code: anything it raises on import, sys.exit too
                shown = exc.original if isinstance(exc, ToolRaised) else exc
                raise ToolLoadError(f"{where}: tool '{decl.name}': cannot import module '{decl.module}': "
                                    f"{type(shown).__name__}: {shown} — put it beside the blueprint or install it") from exc
            finally:
                if added:
                    sys.path.remove(folder)
        for part in decl.attribute.split("."):
            if not hasattr(target, part):
                raise ToolLoadError(f"{where}: tool '{decl.name}': module '{decl.module}' has no '{decl.attribute}'")
            target = getattr(target, part)
        if not callable(target):
            raise ToolLoadError(f"{where}: tool '{decl.name}': '{decl.ref}' is not a function")
        return typing.cast(Callable[..., Any], target)

    def check(self, name: str, arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
        """The arguments as keyword arguments of the tool, or why they do not fit."""
        tool = self.get(name)
        arguments, problem = read_arguments(arguments)  # length and depth first: nothing recurses before
        if arguments is None:
            return None, problem
        validator = self._validators.get(name)
        if validator is None:
            import jsonschema

            validator = self._validators[name] = jsonschema.Draft202012Validator(tool.spec.parameters)
        problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if problems:
            first = problems[0]
            at = ".".join(str(p) for p in first.absolute_path)
            return None, f"the arguments do not fit the tool's parameters: {f'{at}: ' if at else ''}{first.message}"[:MAX_ERROR_CHARS]
        try:
            tool.signature.bind(**arguments)
        except TypeError as exc:
            return None, f"the arguments do not fit the tool's signature: {exc}"
        return arguments, None

    async def call(self, name: str, arguments: Any, *, call_id: str = "", source: str = "model",
                   tape: tuple[Any, TapeMode] | None = None, session: str | None = None) -> ToolRun:
        """Run the tool; every failure is in the returned ToolRun's `error`. `session` is the
        one calling (an MCP server of lifetime `session` is its own)."""
        started = time.perf_counter()
        if not self.has(name):
            known = ", ".join(self.names()) or "none"
            return ToolRun(call_id, name, arguments, None, f"there is no tool '{name}' (tools: {known})", 0.0, source)
        kwargs, problem = self.check(name, arguments)
        if kwargs is None:
            return ToolRun(call_id, name, kept(arguments), None, problem, (time.perf_counter() - started) * 1000, source)
        if tape is not None and tape[1] == "replay":
            served = _served(tape[0], name, kwargs)
            if served is not None:
                return ToolRun(call_id, name, kwargs, served.get("result"), served.get("error"), float(served.get("ms", 0.0)), "tape")
        tool = self.get(name)
        decl = tool.decl
        result: str | None = None
        error: str | None = None
        try:
            if name not in self.decls and self.mcp is not None:  # an MCP tool: the server's own loop times it
                value = await asyncio.wait_for(self.mcp.call(name, kwargs, decl.timeout, session), decl.timeout)
            else:
                value = await invoke(tool.function, kwargs, decl.timeout, name)
            result = guarded_call(as_text, value, decl.max_chars)  # a result's str() is tool code too
        except TimeoutError:
            error = f"the tool timed out after {decl.timeout:g} s"
        except ToolRaised as exc:  # SystemExit, KeyboardInterrupt, ... of the tool's own
            error = replace_lone_surrogates(worded(exc.original))[:MAX_ERROR_CHARS]
        except Exception as exc:  # the tool's own failure: data for the model
            error = replace_lone_surrogates(f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]
        run = ToolRun(call_id, name, kwargs, result, error, (time.perf_counter() - started) * 1000, source)
        if tape is not None and tape[1] == "record":
            tape[0].add_tool_result(name, kwargs, result, error, run.ms)
        return run


def _served(cassette: Any, name: str, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The next recorded result of `name` with these arguments, or None."""
    key = canonical(arguments)
    found = [r for r in cassette.tool_results if r.get("tool") == name and canonical(r.get("arguments")) == key]
    if not found:
        return None
    served = getattr(cassette, "_tools_served", None)
    if served is None:
        served = cassette._tools_served = {}
    n = served.get((name, key), 0)
    served[(name, key)] = n + 1
    return typing.cast(dict[str, Any], found[min(n, len(found) - 1)])


def canonical(arguments: Any) -> str:
    """One text for equal arguments, whatever their key order."""
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


async def invoke(function: Callable[..., Any], kwargs: Mapping[str, Any], timeout: float, name: str) -> Any:
    """Call `function(**kwargs)` within `timeout` seconds (TimeoutError past it): awaited when
    it is a coroutine function, else in a daemon thread of its own. Whatever BaseException the
    tool raises comes out as `ToolRaised` (soul.runtime.tools.guard): no tool stops the process."""
    # asyncio.timeout, not wait_for: the tool runs in the turn's own task, so the turn's
    # cancellation (a Ctrl-C) reaches it, and is not lost when the tool ends in the same step
    if inspect.iscoroutinefunction(function):
        async with asyncio.timeout(timeout):
            return await guarded(lambda: function(**kwargs))
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not future.done():
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

    def work() -> None:
        try:
            value, error = function(**kwargs), None
        except BaseException as exc:  # the tool's own, whatever it is: no signal lands in this thread
            value, error = None, carried(exc)
        # RuntimeError: the loop is gone (the call timed out and the run ended): nobody waits
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    # A daemon thread, not the loop's executor: a tool that never returns must not keep the
    # process alive at exit (the executor's threads are joined then).
    threading.Thread(target=work, name=f"soul-tool-{name}", daemon=True).start()
    async with asyncio.timeout(timeout):
        value = await future
    if inspect.isawaitable(value):  # a plain function that returned a coroutine
        awaitable = value
        async with asyncio.timeout(timeout):
            value = await guarded(lambda: awaitable)
    return value


def as_text(value: Any, max_chars: int) -> str:
    """A result as the text the model reads, at most `max_chars` characters plus the note."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    text = replace_lone_surrogates(text)
    if len(text) > max_chars:
        text = f"{text[:max_chars]}\n[... cut: {len(text) - max_chars:,} more characters]"
    return text


# -- describing a function -----------------------------------------------------------------

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def describe(decl: ToolDecl, function: Callable[..., Any], where: str) -> tuple[inspect.Signature, ToolSpec]:
    """The signature of `function` and its ToolSpec: parameters' JSON Schema from the type
    hints, descriptions from the docstring (Google `Args:` or `:param x:` lines)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolLoadError(f"{where}: tool '{decl.name}': its signature cannot be read: {exc}") from exc
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # hints naming what is not importable: describe without them
        hints = {}
    doc = inspect.getdoc(function) or ""
    summary, params_doc = _docstring(doc)
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    for p in signature.parameters.values():
        if p.kind is p.POSITIONAL_ONLY and p.default is p.empty:
            raise ToolLoadError(f"{where}: tool '{decl.name}': parameter '{p.name}' is positional-only; "
                                "a model passes arguments by name")
        if p.kind is p.VAR_POSITIONAL:
            continue
        if p.kind is p.VAR_KEYWORD:
            extra = True
            continue
        if p.kind is p.POSITIONAL_ONLY:
            continue
        schema = type_schema(hints.get(p.name, p.annotation))
        if p.name in params_doc:
            schema = {**schema, "description": params_doc[p.name]}
        if p.default is p.empty:
            required.append(p.name)
        elif _jsonable(p.default):
            schema = {**schema, "default": json.loads(json.dumps(p.default))}  # a tuple as a list
        properties[p.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        parameters["required"] = required
    description = decl.description or summary or f"The Python function {decl.ref}."
    return signature, ToolSpec(decl.name, description, parameters)


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a type hint; {} (anything) for what JSON cannot say."""
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [type_schema(a) for a in args]
        return {} if any(o == {} for o in options) else {"anyOf": options}
    if origin in (list, tuple, set, frozenset) or origin is typing.Sequence or str(origin) == "<class 'collections.abc.Sequence'>":
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_schema(args[0])}
        if origin is tuple and args:
            return {"type": "array", "prefixItems": [type_schema(a) for a in args], "minItems": len(args), "maxItems": len(args)}
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin in (dict, typing.Mapping) or str(origin) == "<class 'collections.abc.Mapping'>":
        return {"type": "object", "additionalProperties": type_schema(args[1])} if len(args) == 2 else {"type": "object"}
    return {}


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_PARAM_LINE = re.compile(r"^\s*:param\s+(?:\w+\s+)?(\w+):\s*(.*)$")
_ARG_LINE = re.compile(r"^\s{0,8}(\*{0,2}\w+)\s*(?:\([^)]{0,200}\))?:\s*(.*)$")


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The docstring's first paragraph, and each parameter's description."""
    summary = doc.split("\n\n", 1)[0].strip()
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        match = _PARAM_LINE.match(line)
        if match:
            params[match.group(1)] = match.group(2).strip()
            continue
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if not stripped:
                continue
            if not line.startswith((" ", "\t")):
                in_args = False
                continue
            match = _ARG_LINE.match(line)
            if match and line[: len(line) - len(line.lstrip())].__len__() <= 8:
                params[match.group(1).lstrip("*")] = match.group(2).strip()
    return summary if not summary.startswith((":param", "Args:")) else "", params
