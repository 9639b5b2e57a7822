"""A tool that exits or raises KeyboardInterrupt does not shut `soul serve` down: the turn
that called it answers, and the server answers the next request (docs/tools.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from serving import Server, write_script

TOOLS = '''
import sys


def exits() -> str:
    """Ends the process, as a script would."""
    sys.exit(3)


async def interrupts() -> str:
    """Raises KeyboardInterrupt on the server's event loop."""
    raise KeyboardInterrupt
'''

BLUEPRINT = """
soul: stopper
version: 1
mode: chained
tools:
  exits: serve_stop_tools:exits
  interrupts: serve_stop_tools:interrupts
steps:
  lookup: {uses: tool}
  reply: {uses: external_dialogue, after: [lookup]}
"""

ANSWER = "<tool_answer>The tool failed.</tool_answer>"
REPLY = '<external_dialogue verb="says">Still here.</external_dialogue>'


def test_a_tool_that_exits_leaves_the_server_serving(tmp_path: Path, serve: Callable[..., Server]) -> None:
    (tmp_path / "serve_stop_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "soul.yaml").write_text(BLUEPRINT, encoding="utf-8")
    script = write_script(tmp_path, [
        '<tool_call name="exits">{}</tool_call>', ANSWER, REPLY,
        '<tool_call name="interrupts">{}</tool_call>', ANSWER, REPLY,
    ])
    server = serve(str(tmp_path / "soul.yaml"), "--script", str(script))
    sid = httpx.post(server.url + "/api/sessions", json={}, timeout=10).json()["id"]
    for tool, error in (("exits", "SystemExit: 3"), ("interrupts", "KeyboardInterrupt")):
        turn = httpx.post(f"{server.url}/api/sessions/{sid}/messages", json={"text": "go"}, timeout=30)
        assert turn.status_code == 200, turn.text
        assert turn.json()["reply"] == "Still here."
        assert turn.json()["steps"]["lookup"]["error"] == error, tool
        assert server.proc.poll() is None, server.log.read_text()
    assert httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()["session"]["turns"] == 2
