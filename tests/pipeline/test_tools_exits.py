"""A tool can never stop the process (docs/tools.md, "failures are data, never crashes").

A tool body that raises `SystemExit` (`sys.exit`, argparse's `parser.error`, click in
standalone mode), `KeyboardInterrupt`, `GeneratorExit` or a `CancelledError` of its own —
sync or async — reaches the model as an error result, and `soul run` goes on to answer; only
a real Ctrl-C of the user (SIGINT, delivered to the main thread) stops the turn, and a
cancelled turn still cancels.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from tool_souls import REPLY, xml_call

import soul
from soul.providers import ScriptedProvider

TOOLS = '''
import argparse
import asyncio
import os
import signal
import sys
import time

import click


def exits() -> str:
    """Ends the process, as a script would."""
    sys.exit(3)


def usage_error(flag: str = "--nope") -> str:
    """argparse's parser.error on a bad flag."""
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--city")
    parser.parse_args([flag])
    return "parsed"


@click.command()
def _click_main() -> None:
    raise click.UsageError("no such option")


def clicks() -> str:
    """A click command in standalone mode."""
    _click_main.main(args=[], standalone_mode=True)
    return "clicked"


def interrupts() -> str:
    """Raises KeyboardInterrupt from its own code."""
    raise KeyboardInterrupt("the tool gave up")


def closes() -> str:
    """Raises GeneratorExit from its own code."""
    raise GeneratorExit


async def async_exits() -> str:
    """An async tool that exits."""
    sys.exit(4)


async def async_interrupts() -> str:
    """An async tool that raises KeyboardInterrupt."""
    raise KeyboardInterrupt


async def async_cancels() -> str:
    """An async tool whose own task is cancelled under it."""
    inner = asyncio.ensure_future(asyncio.sleep(10))
    inner.cancel()
    await inner
    return "unreachable"


async def async_closes() -> str:
    """An async tool that raises GeneratorExit itself."""
    raise GeneratorExit


def returns_an_exiting_coroutine() -> object:
    """A plain function that returns a coroutine which exits."""
    async def later() -> str:
        sys.exit(5)
    return later()


class _Exits:
    def __str__(self) -> str:
        sys.exit(6)


def result_exits() -> object:
    """A result whose text exits."""
    return _Exits()


def signals_itself() -> str:
    """A real SIGINT arrives at the process while the tool runs (in its thread)."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1.0)
    return "slept"


async def async_signals_itself() -> str:
    """A real SIGINT arrives while an async tool blocks the loop's (main) thread."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1.0)
    return "slept"


async def waits(marker: str = "") -> str:
    """Waits a long time (until cancelled)."""
    if marker:
        open(marker, "w").close()
    await asyncio.sleep(30)
    return "waited"


def sleeps(marker: str = "") -> str:
    """Sleeps in its thread, after saying it started."""
    if marker:
        open(marker, "w").close()
    time.sleep(30)
    return "slept"
'''

NAMES = ("exits", "usage_error", "clicks", "interrupts", "closes", "async_exits", "async_interrupts",
         "async_cancels", "async_closes", "returns_an_exiting_coroutine", "result_exits",
         "signals_itself", "async_signals_itself", "waits", "sleeps")

BLUEPRINT = """
soul: stopper
version: 1
mode: chained
tools:
{tools}
steps:
  lookup: {{uses: tool}}
  reply: {{uses: external_dialogue, after: [lookup]}}
"""

ANSWER = "<tool_answer>The tool failed.</tool_answer>"


def exiting_soul(folder: Path, module: str) -> Path:
    (folder / f"{module}.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    tools = "\n".join(f"  {name}: {module}:{name}" for name in NAMES)
    tools += f'\n  waits_briefly: {{ref: "{module}:waits", timeout: 0.3}}'
    path = folder / "soul.yaml"
    path.write_text(BLUEPRINT.format(tools=tools), encoding="utf-8")
    return path


def turn(path: Path, replies: list, home: Path) -> tuple:
    provider = ScriptedProvider(replies)
    with soul.load(path, provider=provider, home=home) as s:
        result = s.session().turn_sync("go")
    return result, provider


WORDED = [
    ("exits", "SystemExit: 3"),
    ("usage_error", "SystemExit: 2"),
    ("clicks", "SystemExit: 2"),
    ("interrupts", "KeyboardInterrupt: the tool gave up"),
    ("closes", "GeneratorExit"),
    ("async_exits", "SystemExit: 4"),
    ("async_interrupts", "KeyboardInterrupt"),
    ("async_cancels", "CancelledError"),
    ("async_closes", "GeneratorExit"),
    ("returns_an_exiting_coroutine", "SystemExit: 5"),
    ("result_exits", "SystemExit: 6"),
]


@pytest.mark.parametrize(("tool", "error"), WORDED, ids=[w[0] for w in WORDED])
def test_a_tool_that_exits_or_interrupts_itself_is_an_error_result(tmp_path: Path, tool: str, error: str) -> None:
    path = exiting_soul(tmp_path, f"stop_api_{tool}")
    result, provider = turn(path, [xml_call(tool, "{}"), ANSWER, REPLY], tmp_path / "home")
    assert result.reply == "It is sunny in Oslo."  # the turn went on to answer
    assert result.steps["lookup"]["error"] == error
    sent = provider.requests[1].messages[-1].content  # what the model read
    assert f'<tool_result name="{tool}" status="error">{error}</tool_result>' in sent


@pytest.mark.parametrize("tool", ["exits", "async_exits", "interrupts", "async_interrupts", "usage_error"])
def test_soul_run_goes_on_after_a_tool_exits(tmp_path: Path, soul_home: Path, tool: str) -> None:
    path = exiting_soul(tmp_path, f"stop_cli_{tool}")
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([xml_call(tool, "{}"), ANSWER, REPLY]))
    proc = subprocess.run(
        [sys.executable, "-m", "soul.cli", "run", str(path), "--script", str(script), "-m", "go", "--json"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["reply"] == "It is sunny in Oslo."
    assert data["steps"]["lookup"]["error"].split(":")[0] in ("SystemExit", "KeyboardInterrupt")


def test_soul_run_prints_the_reply_after_a_tool_exits(tmp_path: Path, soul_home: Path) -> None:
    path = exiting_soul(tmp_path, "stop_cli_print")
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([xml_call("exits", "{}"), ANSWER, REPLY]))
    proc = subprocess.run(
        [sys.executable, "-m", "soul.cli", "run", str(path), "--script", str(script), "-m", "go"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "It is sunny in Oslo." in proc.stdout


@pytest.mark.parametrize("tool", ["signals_itself", "async_signals_itself"])
def test_a_real_sigint_during_a_tool_still_stops_the_turn(tmp_path: Path, tool: str) -> None:
    path = exiting_soul(tmp_path, f"stop_sigint_{tool}")
    provider = ScriptedProvider([xml_call(tool, "{}"), ANSWER, REPLY])
    with soul.load(path, provider=provider, home=tmp_path / "home") as s:
        session = s.session()
        with pytest.raises(KeyboardInterrupt):
            session.turn_sync("go")
        assert s.store.snapshot(session.id).session.turns == 0  # nothing of the turn was stored


def test_a_real_sigint_under_a_plain_event_loop_is_the_users(tmp_path: Path) -> None:
    """No asyncio.run (so Python's own SIGINT handler): the KeyboardInterrupt a real SIGINT
    raises inside an async tool is the user's, and stops the turn."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    path = exiting_soul(tmp_path, "stop_sigint_plain")
    provider = ScriptedProvider([xml_call("async_signals_itself", "{}"), ANSWER, REPLY])
    with soul.load(path, provider=provider, home=tmp_path / "home") as s:
        session = s.session()
        loop = asyncio.new_event_loop()
        try:
            with pytest.raises(KeyboardInterrupt):
                loop.run_until_complete(session.turn("go"))
        finally:
            loop.close()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # left as it was
    # a KeyboardInterrupt of the tool's own under the same loop is data
    provider = ScriptedProvider([xml_call("async_interrupts", "{}"), ANSWER, REPLY])
    with soul.load(path, provider=provider, home=tmp_path / "home2") as s:
        loop = asyncio.new_event_loop()
        try:
            result = loop.run_until_complete(s.session().turn("go"))
        finally:
            loop.close()
    assert result.steps["lookup"]["error"] == "KeyboardInterrupt"


@pytest.mark.parametrize("tool", ["waits", "sleeps"])
def test_a_cancelled_turn_still_cancels_while_a_tool_runs(tmp_path: Path, tool: str) -> None:
    path = exiting_soul(tmp_path, f"stop_cancel_{tool}")
    marker = tmp_path / "started"
    provider = ScriptedProvider([xml_call(tool, json.dumps({"marker": str(marker)})), ANSWER, REPLY])

    async def cancel_midway(session: object) -> None:
        task = asyncio.ensure_future(session.turn("go"))  # type: ignore[attr-defined]
        while not marker.exists():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with soul.load(path, provider=provider, home=tmp_path / "home") as s:
        session = s.session()
        asyncio.run(asyncio.wait_for(cancel_midway(session), 10))
        assert s.store.snapshot(session.id).session.turns == 0


@pytest.mark.parametrize("tool", ["waits", "sleeps"])
def test_ctrl_c_of_soul_run_during_a_tool_abandons_the_turn(tmp_path: Path, soul_home: Path, tool: str) -> None:
    path = exiting_soul(tmp_path, f"stop_ctrl_c_{tool}")
    marker = tmp_path / "started"
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([xml_call(tool, json.dumps({"marker": str(marker)})), ANSWER, REPLY]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "soul.cli", "run", str(path), "--script", str(script), "-m", "go"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        for _ in range(1200):
            if marker.exists() or proc.poll() is not None:
                break
            import time

            time.sleep(0.05)
        assert marker.exists(), proc.communicate(timeout=5)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "turn abandoned; nothing was stored" in out


def test_an_async_tool_still_times_out(tmp_path: Path) -> None:
    path = exiting_soul(tmp_path, "stop_timeout")
    result, _ = turn(path, [xml_call("waits_briefly", "{}"), ANSWER, REPLY], tmp_path / "home")
    assert result.steps["lookup"]["error"] == "the tool timed out after 0.3 s"


def test_a_module_that_exits_on_import_is_a_tool_load_error(tmp_path: Path) -> None:
    from soul.errors import ToolLoadError

    path = exiting_soul(tmp_path, "stop_on_import")
    module = tmp_path / "stop_on_import.py"
    module.write_text("import sys\nsys.exit(2)\n" + module.read_text())
    with pytest.raises(ToolLoadError, match=r"cannot import module 'stop_on_import': SystemExit: 2"):
        turn(path, [xml_call("exits", "{}"), ANSWER, REPLY], tmp_path / "home")
