"""Record/replay: stable keys, readable cassettes, misses with a diff, redaction, strict mode,
and `soul run --record / --replay` from the command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

import soul
from soul.cli.main import main
from soul.errors import ProviderError, ReplayMiss
from soul.providers import Request, resolve
from soul.providers.cassette import Cassette, key_of, request_key
from soul.providers.replay import RecordingProvider, ReplayProvider, recording
from soul.providers.scripted import ScriptedProvider
from soul.runtime.turn.prompting.prompt import Message

CLAUDIUS = (
    '<internal_monologue verb="mused">A greeting.</internal_monologue>\n'
    '<external_dialogue verb="said">Hello. What are you building?</external_dialogue>\n'
    "<user_model_check>false</user_model_check>\n"
)


def test_keys_are_stable_and_ignore_transport_options() -> None:
    # Pinned: a key that changes breaks every cassette users have recorded.
    assert request_key("anthropic", "claude-x", [("system", "s"), ("user", "hi")], {"temperature": 0.5, "max_tokens": 10}) == "793438f1c931d4cf"
    messages = (Message("system", "s"), Message("user", "hi"))
    a = Request("anthropic/claude-x", messages, {"max_tokens": 10, "temperature": 0.5, "base_url": "http://a", "timeout": 3})
    b = Request("anthropic/claude-x", messages, {"temperature": 0.5, "max_tokens": 10, "api_key_env": "K"})
    assert key_of(a) == key_of(b) == "793438f1c931d4cf"
    assert key_of(Request("anthropic/claude-y", messages, {"temperature": 0.5, "max_tokens": 10})) != key_of(a)
    assert key_of(Request("anthropic/claude-x", messages, {"temperature": 0.6, "max_tokens": 10})) != key_of(a)


def test_a_recording_replays_with_chunks_and_usage(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    wrap = recording(path)
    provider = wrap(ScriptedProvider(["first\nline two", "second"]))
    r1 = Request("anthropic/claude-x", (Message("user", "one"),), {"temperature": 0.1})
    r2 = Request("anthropic/claude-x", (Message("user", "two"),))

    async def record() -> None:
        await provider.complete(r1)
        [c async for c in provider.stream(r2)]

    asyncio.run(record())
    data = yaml.safe_load(path.read_text())
    assert [c["reply"] for c in data["calls"]] == ["first\nline two", "second"]
    assert data["calls"][1]["chunks"] == ["second"] and "chunks" not in data["calls"][0]
    assert "reply: |-\n    first\n    line two" in path.read_text()  # readable literal blocks
    replay = ReplayProvider.from_file(path)

    async def play() -> tuple[str, list[str]]:
        first = await replay.complete(r1)
        chunks = [c async for c in replay.stream(r2)]
        return first.text, [c.text for c in chunks]

    text, chunks = asyncio.run(play())
    assert text == "first\nline two" and chunks == ["second", ""]


def test_a_miss_names_the_nearest_call_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    provider = recording(path)(ScriptedProvider(["a reply"]))
    asyncio.run(provider.complete(Request("local", (Message("system", "You are Claudius."), Message("user", "Hello there")))))
    replay = ReplayProvider.from_file(path)
    with pytest.raises(ReplayMiss) as caught:
        asyncio.run(replay.complete(Request("local", (Message("system", "You are Claudius."), Message("user", "Goodbye there")))))
    message = str(caught.value)
    assert "replay miss" in message and "Nearest recorded call: key" in message
    assert "-Hello there" in message and "+Goodbye there" in message


def test_replay_model_strings_match_any_recorded_model(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    asyncio.run(recording(path)(ScriptedProvider(["canned"])).complete(Request("openai/gpt-x", (Message("user", "q"),))))
    provider = resolve(f"replay:{path}")
    assert asyncio.run(provider.complete(Request(f"replay:{path}", (Message("user", "q"),)))).text == "canned"


def test_secrets_never_reach_a_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-ant-super-secret-value-123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    path = tmp_path / "c.yaml"
    provider = recording(path)(ScriptedProvider([f"the key is {secret}"]))
    asyncio.run(provider.complete(Request("anthropic/x", (Message("user", f"my key: {secret}"),), {"api_key": secret})))
    text = path.read_text()
    assert secret not in text and "[redacted]" in text


def test_strict_replay_refuses_live_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOUL_REPLAY", "strict")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-whatever-000000000000")
    with pytest.raises(ProviderError, match="SOUL_REPLAY=strict: model 'anthropic/claude-x' would make a live call"):
        resolve("anthropic/claude-x")


def test_soul_load_records_through_wrap(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    s = soul.load("claudius", provider=ScriptedProvider([CLAUDIUS]), home=tmp_path / "h", wrap=recording(path))
    assert s.session().turn_sync("Hello").reply == "Hello. What are you building?"
    s.close()
    calls = Cassette.load(path).calls
    assert len(calls) == 1 and calls[0].provider == "local" and calls[0].usage["output_tokens"] > 0
    assert isinstance(s.provider_for("local")[0], RecordingProvider)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_record_then_replay_then_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump([CLAUDIUS]))
    cassette = str(tmp_path / "hello.yaml")
    code, out, _ = run(capsys, "run", "claudius", "--script", str(script), "--record", cassette, "-m", "Hello", "--json")
    assert code == 0
    recorded = json.loads(out)["reply"]
    # claudius recalls memories: the recall is on the tape too, since the field has changed
    # since (it remembered this very exchange) and a replay must see the field as recorded
    [recall] = Cassette.load(cassette).recalls
    assert recall["mode"] == "resonate" and recall["query"] == "Hello" and recall["hits"] == []
    monkeypatch.setenv("SOUL_REPLAY", "strict")  # any live call would now be an error
    code, out, _ = run(capsys, "run", "claudius", "--replay", cassette, "-m", "Hello", "--json")
    assert code == 0 and json.loads(out)["reply"] == recorded == "Hello. What are you building?"
    code, out, err = run(capsys, "run", "claudius", "--replay", cassette, "-m", "Hello, again", "--json")
    assert code == 1 and "replay miss" in err and "+user: Hello, again" in err
    code, _, err = run(capsys, "run", "claudius", "--replay", cassette, "--script", str(script), "-m", "x")
    assert code == 1 and "cannot be combined" in err
