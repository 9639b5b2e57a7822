"""MCP servers as tools: what a `ToolBox` asks of the blueprint's `mcp:` entries.

`McpTools` turns each entry's allowed tools (`use:`, or every listed tool for `"*"`) into
tools of the box under their own names, with the JSON Schema the server lists (checked: a
schema that is not Draft 2020-12 JSON Schema of an object, a `use:` name the server does not
list, or two tools sharing a name is an `McpServerError` before any call). Servers start
when a call first needs them (`ready`, from the tool loop) — never at validation unless
`soul validate --tools` asks — and are held by the box (lifetime `process`) or by the session
(lifetime `session`) through `servers.SERVERS`. A call's result is text for the model: text
blocks as they are, other blocks named, structured content as JSON when there is no text; a
result the server marks as an error is raised as `McpToolError`, which the box reports to the
model as data, like any tool's exception. `McpBox` is the part of `ToolBox` that knows of
them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from soul.errors import McpServerError
from soul.language import TOOL_NAME, Blueprint, McpServerDecl, ToolDecl
from soul.providers import ToolSpec
from soul.runtime.tools.servers import SERVERS, Connection, ListedTool

MAX_SCHEMA_CHARS = 100_000  # of one tool's input schema, as JSON


class McpToolError(Exception):
    """The server ran the tool and reported a failure (`isError`): data for the model."""


class McpTools:
    """A blueprint's MCP entries, as the box's tools."""

    def __init__(self, blueprint: Blueprint) -> None:
        self.blueprint = blueprint
        self.servers: dict[str, McpServerDecl] = dict(blueprint.mcp)
        self._tools: dict[str, tuple[McpServerDecl, ListedTool]] = {}  # a tool's name → its server, listing
        self._listed: set[str] = set()  # the entries whose tools are in `_tools`
        self._token = object()  # this box, as a holder of connections
        self._sessions: set[str | None] = set()

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def declares(self, name: str) -> bool:
        """Whether `name` is an entry or a tool a `use:` list names (known without starting)."""
        return name in self.servers or any(name in (s.use or ()) for s in self.servers.values())

    def expand(self, names: Iterable[str]) -> tuple[str, ...]:
        """`names` with each entry replaced by its tools (known once `ready` listed them)."""
        out: dict[str, None] = {}
        for name in names:
            server = self.servers.get(name)
            if server is None:
                out[name] = None
            else:
                out.update(dict.fromkeys(t for t, (s, _) in self._tools.items() if s.name == server.name))
        return tuple(out)

    def entries_for(self, names: Iterable[str]) -> list[McpServerDecl]:
        """The entries `names` (entry or tool names) need started."""
        wanted: dict[str, McpServerDecl] = {}
        for name in names:
            if name in self.servers:
                wanted[name] = self.servers[name]
            elif name not in self.blueprint.tools:
                owner = next((s for s in self.servers.values() if name in (s.use or ()) or (s.use is None and s.name not in self._listed)), None)
                if owner is not None:
                    wanted[owner.name] = owner
        return list(wanted.values())

    async def ready(self, names: Iterable[str], session: str | None) -> None:
        """Start (or reach) the servers `names` need and list their tools, off the event loop."""
        for server in self.entries_for(names):
            await self.connect(server, session)

    async def connect(self, server: McpServerDecl, session: str | None) -> Connection:
        holder: Hashable = (self._token, session if server.lifetime == "session" else None)
        connection = await asyncio.to_thread(SERVERS.acquire, server, self.blueprint.folder, holder, session)
        self._sessions.add(holder[1])  # type: ignore[index]
        if server.name not in self._listed:
            self._adopt(server, connection)
        return connection

    def connect_sync(self, server: McpServerDecl) -> Connection:
        """`connect` for synchronous callers (`soul validate --tools`), process lifetime."""
        connection = SERVERS.acquire(server, self.blueprint.folder, (self._token, None), None)
        self._sessions.add(None)
        if server.name not in self._listed:
            self._adopt(server, connection)
        return connection

    def _adopt(self, server: McpServerDecl, connection: Connection) -> None:
        """The server's listing checked and its allowed tools taken in."""
        listed = {t.name: t for t in connection.tools}
        if server.use is not None:
            missing = [u for u in server.use if u not in listed]
            if missing:
                raise McpServerError(f"{self.where(server)}: MCP server '{server.name}' lists no tool "
                                     f"{', '.join(repr(m) for m in missing)} (it lists: {', '.join(listed) or 'none'})")
            chosen = [listed[u] for u in server.use]
        else:
            chosen = [t for t in connection.tools if TOOL_NAME.match(t.name)]
        for tool in chosen:
            problem = schema_problem(tool.input_schema)
            if problem is not None:
                raise McpServerError(f"{self.where(server)}: MCP server '{server.name}': tool '{tool.name}' has "
                                     f"an input schema that is not usable: {problem}")
            clash = ("a Python tool" if tool.name in self.blueprint.tools else
                     f"a tool of MCP server '{self._tools[tool.name][0].name}'" if tool.name in self._tools else None)
            if clash is not None:
                raise McpServerError(f"{self.where(server)}: MCP server '{server.name}' offers a tool "
                                     f"'{tool.name}', the name of {clash}: list the tools to use with `use:`")
            self._tools[tool.name] = (server, tool)
        self._listed.add(server.name)

    def where(self, server: McpServerDecl) -> str:
        pos = self.blueprint.source.position(server.path)
        return f"{self.blueprint.file}:{pos.line}:{pos.col}"

    def describe(self, name: str) -> tuple[ToolDecl, ToolSpec]:
        """The declaration and spec of a listed tool (`ready` first)."""
        server, tool = self._tools[name]
        decl = ToolDecl(name, f"mcp:{server.name}", server.path, server.timeout,
                        tool.description or f"The tool {tool.name} of MCP server {server.name}.", server.max_chars)
        return decl, ToolSpec(name, decl.description, dict(tool.input_schema))

    def listing(self, server: McpServerDecl) -> list[ListedTool]:
        """The tools of `server` the soul may use, as listed (after `connect`)."""
        return [tool for s, tool in self._tools.values() if s.name == server.name]

    async def call(self, name: str, arguments: dict[str, Any], timeout: float, session: str | None) -> str:
        """Call a listed tool; McpToolError when the server reports a failure."""
        server, tool = self._tools[name]
        connection = await self.connect(server, session)
        result = await connection.call(tool.name, arguments, timeout)
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise McpToolError(text or "the server reported an error")
        return text

    def release(self, session: str | None) -> None:
        """A session ended: its `session`-lifetime servers stop."""
        if session is not None and session in self._sessions:
            self._sessions.discard(session)
            SERVERS.release((self._token, session))

    def close(self) -> None:
        """The soul closed: every server it holds is let go (and stops if nobody else holds it)."""
        for session in list(self._sessions):
            SERVERS.release((self._token, session))
        self._sessions.clear()


class McpBox:
    """What a `ToolBox` adds for MCP servers: names that stand for a server's tools, servers
    started when a call needs them, and let go with the session or the soul."""

    decls: Mapping[str, ToolDecl]
    mcp: McpTools | None

    def __bool__(self) -> bool:
        return bool(self.decls) or self.mcp is not None

    def names(self) -> tuple[str, ...]:
        """The Python tools and the MCP entries (each standing for its tools)."""
        return (*self.decls, *(self.mcp.servers if self.mcp is not None else ()))

    def declares(self, name: str) -> bool:
        """Whether a step may list `name`: a Python tool, an MCP entry or a tool its `use:` names."""
        return name in self.decls or (self.mcp is not None and self.mcp.declares(name))

    def has(self, name: str) -> bool:
        """Whether `name` is a tool the model may call now (MCP tools once listed)."""
        return name in self.decls or (self.mcp is not None and name in self.mcp)

    async def ready(self, names: Sequence[str], session: str | None = None) -> tuple[str, ...]:
        """`names` as the tools a call offers: MCP servers they need started and listed (off
        the event loop), each MCP entry replaced by its tools."""
        if self.mcp is None:
            return tuple(names)
        await self.mcp.ready(names, session)
        return self.mcp.expand(names)

    def release(self, session: str | None) -> None:
        """A session closed: the MCP servers it held alone stop."""
        if self.mcp is not None:
            self.mcp.release(session)

    def close(self) -> None:
        """The soul closed: every MCP server it holds is let go."""
        if self.mcp is not None:
            self.mcp.close()


def schema_problem(schema: Any) -> str | None:
    """What makes a listed input schema unusable, or None: it must be a JSON Schema (Draft
    2020-12) of an object, at most MAX_SCHEMA_CHARS as JSON."""
    import jsonschema

    if not isinstance(schema, dict):
        return f"it is a {type(schema).__name__}, not an object"
    if schema.get("type", "object") != "object":
        return f"its type is {schema.get('type')!r}; tool arguments are an object"
    try:
        if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            return f"it is over {MAX_SCHEMA_CHARS:,} characters"
        jsonschema.Draft202012Validator.check_schema(schema)
    except (TypeError, ValueError) as exc:
        return str(exc)[:500]
    except jsonschema.SchemaError as exc:
        return exc.message[:500]
    return None


def result_text(result: Any) -> str:
    """A `CallToolResult` as text: text blocks, other blocks named, else structured content."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '?')}, {len(getattr(block, 'data', '') or ''):,} base64 characters]")
        elif kind == "resource_link":
            parts.append(f"[resource: {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {getattr(resource, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    return "\n".join(parts)
