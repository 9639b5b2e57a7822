"""MCP tools (docs/tools.md): a `tools:` entry naming an MCP server — mcp-server-time from
PyPI, and a server the tests write with the official SDK, on stdio and Streamable HTTP —
called through the same tool loop as Python tools: results reach the next step, failures and
timeouts are data, calls are taped, servers stop with the soul (and after kill -9 of soul's
process), and a command the user did not allow never runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp_souls import alive, gone_within, http_server, soul_yaml, time_server_command, write_server

import soul
from soul.errors import CommandNotAllowed, McpServerError
from soul.language import forget_allowed_commands
from soul.providers import ReplayProvider, ScriptedProvider, recording

pytest.importorskip("mcp")

REPLY = '<external_dialogue verb="says">Done.</external_dialogue>'
ANSWER = "<tool_answer>Found it.</tool_answer>"


@pytest.fixture(autouse=True)
def _no_allowed_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOUL_ALLOW_COMMANDS", raising=False)
    forget_allowed_commands()


def allow(monkeypatch: pytest.MonkeyPatch, *commands: list[str]) -> None:
    import shlex

    monkeypatch.setenv("SOUL_ALLOW_COMMANDS", ",".join(shlex.join(c) for c in commands))


def sdk_server(tmp_path: Path, *, lingers: bool = False) -> list[str]:
    return [sys.executable, str(write_server(tmp_path, lingers=lingers))]


def entry(command: list[str] | str, use: str = "[add, fail, slow, pid, count]", more: str = "") -> str:
    target = json.dumps(command)
    return f"  calc:\n    mcp: {target}\n    use: {use}\n{more}"


def server_pids(name: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", name], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def test_mcp_server_time_from_pypi_answers_and_its_result_reaches_the_next_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = time_server_command(tmp_path)
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, f"  clock:\n    mcp: {json.dumps(command)}\n    use: [get_current_time]\n")
    replies = ['<tool_call name="get_current_time">{"timezone": "Europe/Oslo"}</tool_call>', ANSWER, REPLY]
    provider = ScriptedProvider(replies)
    with soul.load(path, provider=provider) as s:
        result = s.session().turn_sync("What time is it in Oslo?")
        running = [p for p in server_pids(Path(command[0]).name) if alive(p)]
        assert running, "the server runs while the soul is open"
    lookup = result.steps["lookup"]
    assert lookup["error"] is None and json.loads(lookup["result"])["timezone"] == "Europe/Oslo"
    # the next step's prompt (the reply, chained) shows the tool's result
    reply_prompt = "\n".join(m.content for m in provider.requests[2].messages)
    assert "Europe/Oslo" in reply_prompt and "Found it." in reply_prompt
    # the model was shown the server's own schema, and only the tool `use:` allows
    system = provider.requests[0].messages[0].content
    assert "- get_current_time:" in system and '"timezone"' in system and "convert_time" not in system
    assert result.trace.calls[0].tools[0]["tool"] == "get_current_time"
    assert all(gone_within(p, 10) for p in running), "the server stops with the soul"


def test_an_sdk_server_on_stdio_with_native_calls_errors_and_timeouts_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = sdk_server(tmp_path)
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, entry(command, more="    timeout: 1.5\n"), extra="chetana: {}\n")
    calls = {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 40}},
                            {"name": "fail", "arguments": {"reason": "the backend is down"}},
                            {"name": "slow", "arguments": {"seconds": 10}},
                            {"name": "add", "arguments": {"a": "two"}}]}
    provider = ScriptedProvider([calls, ANSWER, REPLY])
    with soul.load(path, provider=provider) as s:
        session = s.session()
        result = session.turn_sync("add")
        snapshot = s.store.snapshot(result.session_id)
    runs = result.steps["lookup"]["calls"]
    assert [r["tool"] for r in runs] == ["add", "fail", "slow", "add"]
    assert runs[0]["result"] == "42" and runs[0]["error"] is None
    assert runs[1]["result"] is None and runs[1]["error"] == "McpToolError: Error executing tool fail: the backend is down"
    assert runs[2]["error"] == "the tool timed out after 1.5 s"
    assert runs[3]["error"].startswith("the arguments do not fit the tool's parameters")
    assert [t.name for t in provider.requests[0].tools] == ["add", "fail", "slow", "pid", "count"]
    assert provider.requests[0].tools[0].parameters["required"] == ["a", "b"]
    tool_messages = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert tool_messages[0].content == "42" and tool_messages[1].is_error
    mastery = snapshot.chetana["self_model"]["tool_mastery"]
    assert mastery["add"]["successes"] == 1 and mastery["fail"]["successes"] == 0


def test_an_sdk_server_over_streamable_http(tmp_path: Path) -> None:
    with http_server(tmp_path) as url:
        path = soul_yaml(tmp_path, f"  calc:\n    mcp: {url}\n    use: [add]\n")
        provider = ScriptedProvider([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, ANSWER, REPLY])
        with soul.load(path, provider=provider) as s:  # a URL runs nothing: no consent needed
            result = s.session().turn_sync("add")
    assert result.steps["lookup"]["result"] == "3"


def test_a_command_the_user_did_not_allow_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "RAN"
    script = tmp_path / "evil.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    path = soul_yaml(tmp_path, entry([sys.executable, str(script)], use='"*"'))
    provider = ScriptedProvider([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, ANSWER, REPLY])
    with soul.load(path, provider=provider) as s:
        session = s.session()
        with pytest.raises(CommandNotAllowed, match=r"SOUL_ALLOW_COMMANDS=.*--allow-command"):
            session.turn_sync("add")
        snapshot = s.store.snapshot(session.id)
        assert snapshot.session.turns == 0 and snapshot.recent == ()  # nothing stored
    assert not marker.exists()


def test_the_allow_list_file_in_the_data_home_allows_a_command(tmp_path: Path, soul_home: Path) -> None:
    command = sdk_server(tmp_path)
    import shlex

    (soul_home / "allowed-commands").write_text(f"# mine\n{shlex.join(command)}\n")
    path = soul_yaml(tmp_path, entry(command, use="[add]"))
    provider = ScriptedProvider([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}, ANSWER, REPLY])
    with soul.load(path, provider=provider) as s:
        assert s.session().turn_sync("add").steps["lookup"]["result"] == "2"


@pytest.mark.parametrize(("lifetime", "second"), [("process", "2"), ("session", "1")])
def test_lifetime_process_shares_one_server_and_session_gives_each_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lifetime: str, second: str) -> None:
    command = sdk_server(tmp_path)
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, entry(command, use="[count]", more=f"    lifetime: {lifetime}\n"))
    call = {"tool_calls": [{"name": "count", "arguments": {}}]}
    provider = ScriptedProvider([call, ANSWER, REPLY, call, ANSWER, REPLY])
    with soul.load(path, provider=provider) as s:
        first = s.session().turn_sync("count").steps["lookup"]["result"]
        other = s.session().turn_sync("count").steps["lookup"]["result"]
    assert (first, other) == ("1", second)


def test_a_session_lifetime_server_stops_when_its_session_closes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    command = sdk_server(tmp_path, lingers=True)  # stopped by soul, not by its stdin closing
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, entry(command, use="[pid]", more="    lifetime: session\n"))
    provider = ScriptedProvider([{"tool_calls": [{"name": "pid", "arguments": {}}]}, ANSWER, REPLY])
    with soul.load(path, provider=provider) as s:
        session = s.session()

        async def turn_and_close() -> str:
            result = await session.turn("pid")
            pid = result.steps["lookup"]["result"]
            assert alive(int(pid))
            await session.close()
            return pid

        pid = int(asyncio.run(turn_and_close()))
        assert gone_within(pid, 10), "the server stops with its session, before the soul closes"


def test_kill_9_of_soul_leaves_no_server_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = sdk_server(tmp_path, lingers=True)  # outlives its stdin: only the guard stops it
    path = soul_yaml(tmp_path, entry(command, use="[pid]"))
    program = tmp_path / "parent.py"
    program.write_text(textwrap.dedent(f"""
        import sys, time
        import soul
        from soul.providers import ScriptedProvider
        provider = ScriptedProvider([{{"tool_calls": [{{"name": "pid", "arguments": {{}}}}]}}, {ANSWER!r}, {REPLY!r}])
        s = soul.load({str(path)!r}, provider=provider)
        print(s.session().turn_sync("pid").steps["lookup"]["result"], flush=True)
        time.sleep(120)
    """))
    import shlex

    env = {**os.environ, "SOUL_ALLOW_COMMANDS": shlex.join(command)}
    parent = subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = parent.stdout.readline()  # type: ignore[union-attr]
        server = int(line)
        assert alive(server)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert gone_within(server, 10), "the MCP server outlived a kill -9 of soul's process"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_record_then_replay_serves_the_mcp_result_from_the_tape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = sdk_server(tmp_path)
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, entry(command, use="[pid]"))
    cassette = tmp_path / "tape.yaml"
    replies = [{"tool_calls": [{"name": "pid", "arguments": {}}]}, ANSWER, REPLY]
    with soul.load(path, provider=ScriptedProvider(replies), wrap=recording(cassette)) as s:
        recorded = s.session().turn_sync("pid")
    assert "tool_results:" in cassette.read_text()
    with soul.load(path, provider=ReplayProvider.from_file(cassette)) as s:
        replayed = s.session().turn_sync("pid")
    # the pid of the recording's server: served from the tape, not asked of the new one
    assert replayed.steps["lookup"]["result"] == recorded.steps["lookup"]["result"]
    assert replayed.trace.calls[0].tools[0]["source"] == "tape"


def test_a_use_list_naming_a_tool_the_server_lacks_fails_before_the_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = sdk_server(tmp_path)
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, entry(command, use="[add, teleport]"))
    with soul.load(path, provider=ScriptedProvider([ANSWER, REPLY])) as s:
        session = s.session()
        with pytest.raises(McpServerError, match=r"soul\.yaml:\d+:\d+: MCP server 'calc' lists no tool 'teleport' \(it lists: add, pid, fail, slow, count\)"):
            session.turn_sync("x")


def test_a_server_that_fails_to_start_is_an_error_quoting_its_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "crash.py"
    script.write_text("import sys\nprint('cannot open the database', file=sys.stderr)\nsys.exit(3)\n")
    command = [sys.executable, str(script)]
    allow(monkeypatch, command)
    path = soul_yaml(tmp_path, entry(command, use="[add]"))
    with soul.load(path, provider=ScriptedProvider([ANSWER, REPLY])) as s, \
            pytest.raises(McpServerError, match=r"(?s)MCP server 'calc' .* failed to start.*cannot open the database"):
        s.session().turn_sync("x")


def test_soul_run_with_a_script_calls_mcp_server_time_and_leaves_no_process(tmp_path: Path) -> None:
    import shlex

    command = time_server_command(tmp_path)
    path = soul_yaml(tmp_path, f"  clock:\n    mcp: {json.dumps(command)}\n    use: [get_current_time]\n")
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps(['<tool_call name="get_current_time">{"timezone": "Asia/Tokyo"}</tool_call>', ANSWER, REPLY]))
    soul_command = [str(Path(sys.executable).parent / "soul"), "run", str(path), "--script", str(script), "-m", "time?", "--json"]
    refused = subprocess.run(soul_command, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "which you have not allowed" in refused.stderr and "Traceback" not in refused.stderr
    done = subprocess.run([*soul_command, "--allow-command", shlex.join(command)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert json.loads(steps["lookup"]["result"])["timezone"] == "Asia/Tokyo" and json.loads(done.stdout)["reply"] == "Done."
    left = [p for p in server_pids(Path(command[0]).name) if alive(p)]  # this test's server only
    assert not left, "an MCP server outlived `soul run`"


def test_the_sdk_timeout_code_the_connection_reads_is_the_sdks() -> None:
    """The SDK's own read timeout races the tool's (the same seconds): its error, read by its
    code, is the same timeout — so a slow tool always reads "the tool timed out"."""
    import mcp_types

    from soul.runtime.tools.servers import REQUEST_TIMEOUT

    assert REQUEST_TIMEOUT == mcp_types.REQUEST_TIMEOUT
