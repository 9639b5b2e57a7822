"""claude-cli/MODEL against a fake `claude` executable on PATH that speaks stream-json."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from soul.errors import AuthError, ProviderError, ProviderTimeout, ProviderUnavailable
from soul.providers import Policy, Request, resolve
from soul.runtime.turn.prompting.prompt import Message

FAKE = textwrap.dedent('''\
    #!{python}
    """A stand-in for the Claude Code CLI: logs its call, then acts as FAKE_CLAUDE_MODE says."""
    import json, os, sys, time
    prompt = sys.stdin.read()
    with open(os.environ["FAKE_CLAUDE_LOG"], "a") as log:
        log.write(json.dumps({{"argv": sys.argv[1:], "stdin": prompt}}) + "\\n")
    mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
    def emit(obj):
        print(json.dumps(obj), flush=True)
    emit({{"type": "system", "subtype": "init", "model": "fake"}})
    if mode == "slow":
        time.sleep(10)
    if mode == "crash":
        print("fatal: something broke", file=sys.stderr)
        sys.exit(3)
    if mode == "login":
        emit({{"type": "result", "subtype": "error", "is_error": True, "result": "Invalid API key · Please run /login"}})
        sys.exit(1)
    reply = os.environ.get("FAKE_CLAUDE_REPLY", "Hello from the CLI.")
    if mode != "whole":
        for i in range(0, len(reply), 4):
            emit({{"type": "stream_event", "event": {{"type": "content_block_delta", "index": 0,
                  "delta": {{"type": "text_delta", "text": reply[i:i + 4]}}}}}})
    emit({{"type": "assistant", "message": {{"content": [{{"type": "text", "text": reply}}]}}}})
    emit({{"type": "result", "subtype": "success", "is_error": False, "result": reply,
          "total_cost_usd": 0.0012, "usage": {{"input_tokens": 21, "output_tokens": 7}}}})
    ''')

MESSAGES = (Message("system", "You are terse."), Message("user", "Say hello."))


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))
    return log


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def request() -> Request:
    return Request("claude-cli/sonnet", MESSAGES)


def test_stream_reads_deltas_and_the_result_line(fake_claude: Path) -> None:
    provider = resolve("claude-cli/sonnet")

    async def run() -> list:
        return [c async for c in provider.stream(request())]

    chunks = asyncio.run(run())
    assert "".join(c.text for c in chunks) == "Hello from the CLI."
    usage = chunks[-1].usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens, usage.cost) == (21, 7, 0.0012)
    call = calls(fake_claude)[0]
    assert call["argv"][:3] == ["-p", "--output-format", "stream-json"]
    assert call["argv"][call["argv"].index("--model") + 1] == "sonnet"
    assert call["argv"][call["argv"].index("--system-prompt") + 1] == "You are terse."
    assert call["stdin"] == "Say hello."


def test_whole_messages_count_when_no_deltas_come(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "whole")
    assert asyncio.run(resolve("claude-cli/sonnet").complete(request())).text == "Hello from the CLI."


def test_a_re_ask_sends_the_conversation_as_a_transcript(fake_claude: Path) -> None:
    messages = (*MESSAGES, Message("assistant", "Hi"), Message("user", "Again, with tags."))
    asyncio.run(resolve("claude-cli/sonnet").complete(Request("claude-cli/sonnet", messages)))
    assert calls(fake_claude)[0]["stdin"] == "User: Say hello.\n\nAssistant: Hi\n\nUser: Again, with tags."


def test_the_timeout_kills_the_process(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "slow")
    provider = resolve("claude-cli/sonnet", {"timeout": 0.5}, policy=Policy(attempts=1))
    with pytest.raises(ProviderTimeout):
        asyncio.run(provider.complete(request()))


def test_a_crash_and_a_missing_login_say_so(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "crash")
    provider = resolve("claude-cli/sonnet", policy=Policy(attempts=1))
    with pytest.raises(ProviderUnavailable, match="the CLI failed: fatal: something broke"):
        asyncio.run(provider.complete(request()))
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "login")
    with pytest.raises(AuthError, match="run `claude` once to log in"):
        asyncio.run(provider.complete(request()))


def test_a_missing_binary_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProviderError, match=r"'claude'\) is not on PATH — install it"):
        resolve("claude-cli/sonnet")
