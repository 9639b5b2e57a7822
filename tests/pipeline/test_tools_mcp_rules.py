"""MCP entries as written (docs/tools.md): the schema takes them, validation checks them
without starting anything, `soul validate --tools` starts and lists, `soul explain` shows."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from mcp_souls import soul_yaml, write_server

from soul.cli import main
from soul.compiler import load_valid, validate
from soul.language import allow_commands, command_allowed, forget_allowed_commands


@pytest.fixture(autouse=True)
def _no_allowed_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOUL_ALLOW_COMMANDS", raising=False)
    forget_allowed_commands()
    yield
    forget_allowed_commands()


def marker_server(folder: Path) -> tuple[list[str], Path]:
    """A 'server' that leaves a file behind if it is ever started."""
    marker = folder / "RAN"
    script = folder / "server.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    return [sys.executable, str(script)], marker


def texts(path: Path) -> str:
    return "\n".join(d.format() for d in validate(path).diagnostics)


def test_validate_starts_no_server_and_warns_of_a_command_not_allowed(tmp_path: Path) -> None:
    command, marker = marker_server(tmp_path)
    path = soul_yaml(tmp_path, f"  calc:\n    mcp: {json.dumps(command)}\n    use: [add]\n")
    found = texts(path)
    assert "warning: MCP server 'calc' runs" in found and "which you have not allowed" in found
    assert "SOUL_ALLOW_COMMANDS=" in found and "--allow-command" in found
    assert not validate(path).errors and not marker.exists()


def test_an_entry_without_use_offers_every_tool_and_is_warned_about(tmp_path: Path) -> None:
    path = soul_yaml(tmp_path, "  calc: {mcp: \"http://127.0.0.1:9/mcp\"}\n")
    assert not validate(path).errors
    assert "warning: MCP server 'calc' does not say which of its tools the soul may use" in texts(path)
    assert load_valid(str(path)).mcp["calc"].use is None  # every tool it lists
    starred = soul_yaml(tmp_path, "  calc: {mcp: \"http://127.0.0.1:9/mcp\", use: \"*\"}\n")
    assert "does not say which" not in texts(starred)


@pytest.mark.parametrize(("entry", "problem"), [
    ('  calc: {mcp: "http://127.0.0.1:9/mcp", use: []}\n', "tools.calc"),
    ('  calc: {mcp: "http://127.0.0.1:9/mcp", use: [add], lifetime: forever}\n', "tools.calc"),
    ('  calc: {mcp: "http://127.0.0.1:9/mcp", use: ["a b"]}\n', "tools.calc"),
    ('  calc: {mcp: 7, use: [add]}\n', "tools.calc"),
    ('  calc: {mcp: "http://127.0.0.1:9/mcp", use: [add], ref: "m:f"}\n', "tools.calc"),
])
def test_the_schema_refuses_malformed_entries(tmp_path: Path, entry: str, problem: str) -> None:
    path = soul_yaml(tmp_path, entry)
    errors = [d.format() for d in validate(path).errors]
    assert errors and any(problem in e for e in errors)


def test_steps_may_list_an_entry_or_its_tools_and_names_must_not_clash(tmp_path: Path) -> None:
    (tmp_path / "pytools.py").write_text("def add(a: int) -> int:\n    return a\n")
    entry = ('  add: pytools:add\n'
             '  calc: {mcp: "http://127.0.0.1:9/mcp", use: [add, mul]}\n'
             '  more: {mcp: "http://127.0.0.1:9/other", use: [mul, div]}\n')
    steps = ("  reply: {uses: external_dialogue, tools: [calc, div, nope]}\n"
             "  lookup: {uses: tool, tools: [more], with: {tool: mul}}\n")
    found = texts(soul_yaml(tmp_path, entry, steps=steps))
    assert "MCP server 'calc' offers a tool 'add', the name of a Python tool" in found
    assert "MCP server 'calc' offers a tool 'mul', the name of a tool of MCP server 'more'" in found
    assert "step 'reply' lists an undeclared tool 'nope'" in found
    assert "calls an undeclared tool" not in found  # `mul` is a tool of `more`, which the step lists


def test_a_tool_step_may_choose_a_tool_of_a_server_that_offers_every_tool(tmp_path: Path) -> None:
    entry = '  calc: {mcp: "http://127.0.0.1:9/mcp", use: "*"}\n'
    steps = "  lookup: {uses: tool, with: {tool: anything}}\n  reply: {uses: external_dialogue, after: [lookup]}\n"
    assert not validate(soul_yaml(tmp_path, entry, steps=steps)).errors


def test_allow_entries_match_by_leading_words() -> None:
    allow_commands(["uvx mcp-server-time", "node"])
    assert command_allowed(["uvx", "mcp-server-time", "--local-timezone", "UTC"])
    assert not command_allowed(["uvx", "mcp-server-fetch"])
    assert command_allowed(["node", "server.js"]) and not command_allowed(["nodejs", "server.js"])
    assert not command_allowed([])


def test_soul_validate_tools_starts_lists_checks_and_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mcp")
    command = [sys.executable, str(write_server(tmp_path))]
    path = soul_yaml(tmp_path, f"  calc:\n    mcp: {json.dumps(command)}\n    use: [add]\n")
    assert main(["validate", "--tools", str(path)]) == 1  # not allowed: refused, said how to allow
    assert "which you have not allowed" in capsys.readouterr().err
    assert main(["validate", "--tools", "--allow-command", shlex.join(command), str(path)]) == 0
    out = capsys.readouterr().out
    assert "MCP server 'calc'" in out and "1 tool the soul may use" in out
    assert "add: Add two whole numbers." in out and '"required": ["a", "b"]' in out
    bad = soul_yaml(tmp_path, f"  calc:\n    mcp: {json.dumps(command)}\n    use: [add, teleport]\n")
    assert main(["validate", "--tools", str(bad)]) == 1
    assert "lists no tool 'teleport'" in capsys.readouterr().err


def test_soul_explain_shows_the_entries_without_starting_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command, marker = marker_server(tmp_path)
    path = soul_yaml(tmp_path, f"  calc:\n    mcp: {json.dumps(command)}\n    use: [add, mul]\n    lifetime: session\n")
    assert main(["explain", str(path), "-m", "hi"]) == 0
    out = capsys.readouterr().out
    assert f"MCP server 'calc': stdio `{shlex.join(command)}` · lifetime session · may use: add, mul" in out
    assert not marker.exists()


@pytest.mark.parametrize(("written", "command", "url"), [
    ("mcp-server-time --local-timezone UTC", ("mcp-server-time", "--local-timezone", "UTC"), ""),
    ('["uvx", "mcp-server-time"]', ("uvx", "mcp-server-time"), ""),
    ('{command: uvx, args: [mcp-server-time]}', ("uvx", "mcp-server-time"), ""),
    ('{url: "http://127.0.0.1:8000/mcp"}', (), "http://127.0.0.1:8000/mcp"),
    ('"https://tools.example/mcp"', (), "https://tools.example/mcp"),
])
def test_an_entry_names_its_server_in_each_written_form(tmp_path: Path, written: str, command: tuple, url: str) -> None:
    path = soul_yaml(tmp_path, f"  calc:\n    mcp: {written}\n    use: [add]\n")
    assert not validate(path).errors
    server = load_valid(str(path)).mcp["calc"]
    assert (server.command, server.url) == (command, url)
