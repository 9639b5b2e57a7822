"""MCP servers and souls for the MCP tests: a server the tests write with the official SDK
(`MCPServer`, the SDK 2 name of FastMCP), served on stdio or Streamable HTTP (127.0.0.1 only,
and it exits by itself after a while), and blueprints naming it or mcp-server-time."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

SERVER_PY = '''
import os
import sys
import threading

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

LINGERS = {lingers}
app = MCPServer("soul-test")
COUNT = {"n": 0}


@app.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(reason)


@app.tool()
async def slow(seconds: float) -> str:
    """Answers after a while."""
    import anyio

    await anyio.sleep(seconds)
    return "late"


@app.tool()
def count() -> int:
    """How many times it was called on this server."""
    COUNT["n"] += 1
    return COUNT["n"]


if __name__ == "__main__":
    life = threading.Timer(float(os.environ.get("SOUL_TEST_SERVER_LIFE", "120")), lambda: os._exit(0))
    life.daemon = not LINGERS  # a daemon timer lets the server exit when its stdin closes
    life.start()
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
'''


def write_server(folder: Path, *, lingers: bool = False) -> Path:
    """The test server's script in `folder`. It exits when its stdin closes, as stdio servers
    do; with `lingers` it outlives its stdin (until its life ends), like a server that ignores
    EOF: only signals stop it (the SDK's after its grace period, or soul's guard), which is
    what the tests of those stops need — and costs each close the SDK's grace (~2 s)."""
    path = folder / ("lingering_server.py" if lingers else "test_server.py")
    path.write_text(textwrap.dedent(SERVER_PY).replace("{lingers}", str(lingers)), encoding="utf-8")
    return path


def time_server_command(folder: Path | None = None) -> list[str]:
    """mcp-server-time, installed from PyPI beside this interpreter; with `folder`, run through
    a link in it named for this call alone, so a test finds its own server's process by that
    name (`pgrep -f`) and never another test's (the suite runs in parallel processes)."""
    script = Path(sys.executable).parent / "mcp-server-time"
    if folder is not None:
        link = folder / f"mcp-server-time-{uuid.uuid4().hex[:12]}"
        link.symlink_to(script)
        script = link
    return [str(script), "--local-timezone", "UTC"]


def soul_yaml(folder: Path, entry: str, *, steps: str = "", extra: str = "") -> Path:
    """A chained soul whose `tools:` block is `entry` (YAML lines, indented by two)."""
    path = folder / "soul.yaml"
    steps = steps or "  lookup: {uses: tool}\n  reply: {uses: external_dialogue, after: [lookup]}\n"
    path.write_text(f"soul: mcpsoul\nversion: 1\nmode: chained\n{extra}tools:\n{entry}steps:\n{steps}", encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(folder: Path, life_s: float = 120.0) -> Iterator[str]:
    """The test server on Streamable HTTP at 127.0.0.1; its URL. It is stopped on exit and
    exits by itself after `life_s` seconds whatever happens."""
    script = write_server(folder)
    port = free_port()
    env = {"PATH": str(Path(sys.executable).parent), "SOUL_TEST_SERVER_LIFE": str(life_s)}
    process = subprocess.Popen([sys.executable, str(script), "http", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if process.poll() is not None:
                raise RuntimeError("the test MCP server exited before listening")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(10)


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return not alive(pid)
