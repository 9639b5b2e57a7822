"""MCP servers a soul talks to: one client connection per server, and who holds it.

A `Connection` is one MCP client session (the official `mcp` SDK's `ClientSession` over
`stdio_client` or `streamable_http_client`) living on an event loop in a daemon thread of its
own: the SDK's sessions belong to the task that opened them, while soul's calls come from
whatever loop runs the turn (`turn_sync` makes a new one per turn, `soul serve` has one for
all). Calls cross over with `run_coroutine_threadsafe`; a call past its timeout is cancelled
on the connection's loop.

A stdio server is started through `stdio_guard.py`, which leads a process group of its own and
stops the whole group when soul's process dies, even by kill -9 (docs/tools.md); its stderr
goes to `$SOUL_HOME/mcp/<entry>.log`, whose last lines a failed start quotes.

`SERVERS` holds the connections of the process. A `process`-lifetime server is shared by every
soul and session that names the same command (or URL), environment and folder, and stops when
the last holder lets go; a `session`-lifetime server is one per session and stops with it.
Everything still open stops at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import sys
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soul.errors import CommandNotAllowed, McpServerError, MissingExtra
from soul.language import McpServerDecl, command_allowed, how_to_allow

# the JSON-RPC error code of an MCP request that timed out (`mcp_types.REQUEST_TIMEOUT`; the SDK is imported lazily)
REQUEST_TIMEOUT = -32001


MAX_TOOLS = 1000  # a listing longer than this is cut (and said)
MAX_PAGES = 100
CLOSE_S = 5.0  # a connection's shutdown is waited for at most this long
LOG_TAIL = 2000  # characters of the server's stderr quoted when it fails to start
GUARD = Path(__file__).with_name("stdio_guard.py")


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: Any


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise MissingExtra("MCP tools need the `mcp` extra: pip install 'soulgraph[mcp]'") from exc
    return mcp


def log_path(decl: McpServerDecl) -> Path:
    """Where a stdio server's stderr goes."""
    from soul.store import data_home

    folder = data_home() / "mcp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{decl.name}.log"


class Connection:
    """One MCP server, connected: its tools listed, calls made on its own loop."""

    def __init__(self, decl: McpServerDecl, folder: Path | None) -> None:
        self.decl = decl
        self.folder = folder
        self.tools: tuple[ListedTool, ...] = ()
        self.truncated = False
        self.pid: int | None = None  # the guard's pid (the server's process group) for stdio
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._session: Any = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._error: BaseException | None = None

    def open(self) -> None:
        """Start (or reach) the server, initialize and list its tools; blocks, bounded by the
        entry's `start_timeout`. McpServerError (CommandNotAllowed) when it cannot."""
        decl = self.decl
        if decl.stdio and not command_allowed(decl.command):
            raise CommandNotAllowed(f"MCP server '{decl.name}': the blueprint runs `{decl.target}`, which you have not "
                                    f"allowed; to allow it: {how_to_allow(decl.command)}")
        _sdk()
        self._thread = threading.Thread(target=self._main, name=f"soul-mcp-{decl.name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(decl.start_timeout):
            self.close()
            raise McpServerError(f"MCP server '{decl.name}' ({decl.target}) did not answer within "
                                 f"{decl.start_timeout:g} s{self._log_tail()} — raise `start_timeout`, or check the server")
        if self._error is not None:
            error, self._error = self._error, None
            self.close()
            raise McpServerError(f"MCP server '{decl.name}' ({decl.target}) failed to start: "
                                 f"{_describe(error)}{self._log_tail()}") from error

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # anything: reported by open(), never left in a thread
            self._error = self._error or exc
        finally:
            self._ready.set()
            self._done.set()

    async def _serve(self) -> None:
        from mcp.client.session import ClientSession

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(stack))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            self.tools, self.truncated = await _list(session)
            self._session = session
            self._ready.set()
            await self._stop.wait()

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        decl = self.decl
        if not decl.stdio:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(decl.url)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        errlog = stack.enter_context(log_path(decl).open("a", encoding="utf-8"))
        # POSIX: through the guard (process group, parent-death stop); elsewhere the SDK's own
        # process handling (a Windows job object) is what there is
        command, args = ((sys.executable, [str(GUARD), str(os.getpid()), "--", *decl.command]) if os.name == "posix"
                         else (decl.command[0], list(decl.command[1:])))
        params = StdioServerParameters(
            command=command,
            args=args,
            env=dict(decl.env) or None,
            cwd=str(self.folder) if self.folder is not None else None,
        )
        return stdio_client(params, errlog=errlog)

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """`tools/call` on the connection's loop, awaited from any loop; TimeoutError past
        `timeout` (the request is cancelled there)."""
        loop, session = self._loop, self._session
        if loop is None or session is None or self._done.is_set():
            raise McpServerError(f"MCP server '{self.decl.name}' is not running (it stopped, or never started)")
        future = asyncio.run_coroutine_threadsafe(session.call_tool(name, arguments, read_timeout_seconds=timeout), loop)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except concurrent.futures.CancelledError as exc:
            raise McpServerError(f"MCP server '{self.decl.name}' stopped during the call") from exc
        except Exception as exc:
            # the SDK's own read timeout (the same `timeout`) can fire before ours: the same timeout
            if getattr(getattr(exc, "error", None), "code", None) == REQUEST_TIMEOUT:
                raise TimeoutError(f"MCP tool '{name}' timed out") from exc
            raise

    @property
    def alive(self) -> bool:
        return self._ready.is_set() and not self._done.is_set() and self._session is not None

    def close(self) -> None:
        """Stop the connection (and a stdio server with it); bounded by CLOSE_S."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not self._done.is_set():
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_S)
        self._session = None

    def _log_tail(self) -> str:
        if not self.decl.stdio:
            return ""
        try:
            text = log_path(self.decl).read_text(encoding="utf-8", errors="replace")[-LOG_TAIL:].strip()
        except OSError:
            return ""
        return f"; its stderr ({log_path(self.decl)}) ends:\n{text}" if text else ""


async def _list(session: Any) -> tuple[tuple[ListedTool, ...], bool]:
    from mcp.types import PaginatedRequestParams

    tools: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += [ListedTool(t.name, t.description or "", t.input_schema) for t in result.tools]
        cursor = result.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tuple(tools[:MAX_TOOLS]), bool(cursor) or len(tools) > MAX_TOOLS


def _describe(error: BaseException) -> str:
    """An error as one line; an exception group by its first leaf (anyio's task groups wrap)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"[:1000]


class Servers:
    """The process's connections, each with the holders (a soul's tool box, or one of its
    sessions) that use it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Hashable, tuple[Connection, set[Hashable]]] = {}

    @staticmethod
    def key(decl: McpServerDecl, folder: Path | None, session: str | None) -> Hashable:
        where = (decl.command, decl.url, decl.env, str(folder) if decl.stdio else None)
        return (*where, session) if decl.lifetime == "session" else where

    def acquire(self, decl: McpServerDecl, folder: Path | None, holder: Hashable, session: str | None = None) -> Connection:
        """The running connection for `decl` (started now if none is), held by `holder`."""
        key = self.key(decl, folder, session)
        with self._lock:
            entry = self._open.get(key)
            if entry is not None and not entry[0].alive:  # it died: start it again
                entry[0].close()
                del self._open[key]
                entry = None
            if entry is None:
                connection = Connection(decl, folder)
                connection.open()
                entry = self._open[key] = (connection, set())
            entry[1].add(holder)
            return entry[0]

    def release(self, holder: Hashable) -> None:
        """`holder` lets go of every connection it held; those nobody holds stop."""
        closing: list[Connection] = []
        with self._lock:
            for key, (connection, holders) in list(self._open.items()):
                holders.discard(holder)
                if not holders:
                    closing.append(connection)
                    del self._open[key]
        for connection in closing:
            connection.close()

    def close_all(self) -> None:
        with self._lock:
            closing = [c for c, _ in self._open.values()]
            self._open.clear()
        for connection in closing:
            connection.close()


SERVERS = Servers()
atexit.register(SERVERS.close_all)
