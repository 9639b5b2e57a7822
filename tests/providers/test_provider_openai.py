"""openai/MODEL and litellm/ANY through their real SDKs against the chat-completions wire
server on 127.0.0.1 (litellm reaches it as its `openai/` route with `base_url`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPLY
from wire_server import Fault, WireServer

import soul
from soul.errors import AuthError, BadRequest, ProviderTimeout, ProviderUnavailable, RateLimited
from soul.providers import Policy, Request, resolve
from soul.runtime.turn.prompting.prompt import Message

pytest.importorskip("openai")

FAST = Policy(base_delay=0.01, max_delay=0.05, timeout=3.0)
MESSAGES = (Message("system", "You are terse."), Message("user", "Say hello."))
SPECS = ["openai/gpt-test", "litellm/openai/gpt-test"]


def provider(spec: str, wire: WireServer, policy: Policy = FAST, **options: object):
    if spec.startswith("litellm/"):
        pytest.importorskip("litellm")
        options.setdefault("api_key_env", "OPENAI_API_KEY")
    return resolve(spec, {"base_url": wire.openai_url, **options}, policy=policy)


def request(spec: str, **options: object) -> Request:
    return Request(spec, MESSAGES, dict(options))


async def collect(p, r: Request) -> str:
    return "".join([c.text async for c in p.stream(r)])


@pytest.mark.parametrize("spec", SPECS)
def test_complete_and_usage(spec: str, wire: WireServer, keys: str) -> None:
    completion = asyncio.run(provider(spec, wire).complete(request(spec, temperature=0.5, top_p=0.9)))
    assert completion.text == "Hello from the wire."
    sent = wire.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert sent.body["temperature"] == 0.5 and sent.body["top_p"] == 0.9
    assert sent.headers["authorization"] == "Bearer " + keys.replace("ant", "oai")
    assert completion.usage.output_tokens == 5 and completion.usage.input_tokens > 0


@pytest.mark.parametrize("spec", SPECS)
def test_stream_with_usage_in_the_last_chunk(spec: str, wire: WireServer, keys: str) -> None:
    async def run() -> tuple[str, list]:
        chunks = [c async for c in provider(spec, wire).stream(request(spec))]
        return "".join(c.text for c in chunks), chunks

    text, chunks = asyncio.run(run())
    assert text == "Hello from the wire."
    assert chunks[-1].usage is not None and chunks[-1].usage.output_tokens == 5
    assert wire.requests[0].body["stream"] is True


def test_a_base_url_needs_no_key(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert asyncio.run(provider("openai/local-model", wire).complete(request("openai/local-model"))).text
    with pytest.raises(AuthError, match="no key found — set OPENAI_API_KEY"):
        resolve("openai/gpt-4o-mini")


@pytest.mark.parametrize("spec", SPECS)
def test_429_then_500_are_retried(spec: str, wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(status=429, retry_after="0"), Fault(status=503)]
    assert asyncio.run(provider(spec, wire).complete(request(spec))).text == "Hello from the wire."
    assert len(wire.requests) == 3


@pytest.mark.parametrize("spec", SPECS)
def test_auth_and_bad_requests_are_not_retried(spec: str, wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(status=401), Fault(status=400)]
    p = provider(spec, wire)
    with pytest.raises(AuthError) as caught:
        asyncio.run(p.complete(request(spec)))
    assert "oai-test" not in str(caught.value)
    with pytest.raises(BadRequest):
        asyncio.run(p.complete(request(spec)))
    assert len(wire.requests) == 2


@pytest.mark.parametrize("spec", SPECS)
def test_rate_limits_past_the_attempts(spec: str, wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(status=429, retry_after="0")] * 3
    with pytest.raises(RateLimited):
        asyncio.run(provider(spec, wire).complete(request(spec)))


@pytest.mark.parametrize("spec", SPECS)
def test_a_slow_server_times_out(spec: str, wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(delay=1.2)]
    started = time.perf_counter()
    with pytest.raises(ProviderTimeout):
        asyncio.run(provider(spec, wire, Policy(timeout=0.3, attempts=1)).complete(request(spec)))
    assert time.perf_counter() - started < 1.2


@pytest.mark.parametrize("spec", SPECS)
def test_cut_streams(spec: str, wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(cut_after=0))  # nothing delivered: retried
    assert asyncio.run(collect(provider(spec, wire), request(spec))) == "Hello from the wire."
    wire.faults.append(Fault(cut_after=2))  # text delivered: not retried
    with pytest.raises(ProviderUnavailable, match="already been delivered"):
        asyncio.run(collect(provider(spec, wire), request(spec)))


def test_a_failing_turn_leaves_the_session_as_it_was(
    wire: WireServer, keys: str, wired_soul: Callable[..., Path], tmp_path: Path
) -> None:
    path = wired_soul("openai/local-model", wire.openai_url, timeout=0.5)
    s = soul.load(path, home=tmp_path / "home")
    session = s.session()
    wire.replies.append(REPLY)
    assert session.turn_sync("Hi").reply == "Hello there, friend."
    before = s.store.snapshot(session.id)
    wire.faults += [Fault(status=500, retry_after="0")] * 3
    with pytest.raises(ProviderUnavailable):
        session.turn_sync("Again")
    assert s.store.snapshot(session.id) == before
    s.close()


def test_litellm_openai_route_with_a_base_url_needs_no_key(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("litellm")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = resolve("litellm/openai/local-model", {"base_url": wire.openai_url}, policy=FAST)
    assert asyncio.run(p.complete(request("litellm/openai/local-model"))).text == "Hello from the wire."


def test_litellm_without_a_key_says_so_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("litellm")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = resolve("litellm/openai/gpt-test", {"api_key_env": "NO_SUCH_TEST_API_KEY"}, policy=FAST)
    started = time.perf_counter()
    with pytest.raises(AuthError, match="no key was found — set NO_SUCH_TEST_API_KEY"):
        asyncio.run(p.complete(request("litellm/openai/gpt-test")))
    assert time.perf_counter() - started < 5  # not retried as the 500 litellm files it under
