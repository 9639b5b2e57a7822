"""anthropic/MODEL through the real SDK against the Messages-API wire server on 127.0.0.1."""

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

pytest.importorskip("anthropic")

FAST = Policy(base_delay=0.01, max_delay=0.05, timeout=2.0)
MESSAGES = (Message("system", "You are terse."), Message("user", "Say hello."))


def sent_key(headers: dict[str, str]) -> str:
    """The key as the SDK sent it (x-api-key in older SDKs, a bearer token in newer ones)."""
    return headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")


def provider(wire: WireServer, policy: Policy = FAST, **options: object):
    return resolve("anthropic/claude-haiku-4-5", {"base_url": wire.anthropic_url, **options}, policy=policy)


def request(**options: object) -> Request:
    return Request("anthropic/claude-haiku-4-5", MESSAGES, dict(options))


async def collect(p, r: Request) -> tuple[str, list]:
    chunks = [c async for c in p.stream(r)]
    return "".join(c.text for c in chunks), chunks


def test_complete_sends_the_system_prompt_apart_and_reports_usage(wire: WireServer, keys: str) -> None:
    completion = asyncio.run(provider(wire).complete(request(temperature=0.3, max_tokens=50)))
    assert completion.text == "Hello from the wire."
    body = wire.requests[0].body
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert body["temperature"] == 0.3 and body["max_tokens"] == 50
    assert sent_key(wire.requests[0].headers) == keys
    usage = completion.usage
    assert usage.input_tokens > 0 and usage.output_tokens == 5 and usage.latency_s > 0
    assert usage.cost == pytest.approx((usage.input_tokens * 1.0 + 5 * 5.0) / 1e6)


def test_stream_yields_deltas_then_usage(wire: WireServer, keys: str) -> None:
    text, chunks = asyncio.run(collect(provider(wire), request()))
    assert text == "Hello from the wire."
    assert len([c for c in chunks if c.text]) == 4
    assert chunks[-1].usage is not None and chunks[-1].usage.output_tokens == 5
    assert chunks[-1].usage.first_token_s is not None


def test_the_key_comes_from_the_slots_api_key_env(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("SOUL_ALLOW_HOSTS", "127.0.0.1")  # the test server may have it
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-ant-from-my-own-variable-000000")
    asyncio.run(provider(wire, api_key_env="MY_CLAUDE_KEY").complete(request()))
    assert sent_key(wire.requests[0].headers) == "sk-ant-from-my-own-variable-000000"


def test_no_key_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AuthError, match="no key found — set ANTHROPIC_API_KEY or use --model local"):
        resolve("anthropic/claude-x")
    with pytest.raises(AuthError, match="set MY_API_KEY"):
        resolve("anthropic/claude-x", {"api_key_env": "MY_API_KEY"})


def test_a_refused_key_is_not_retried_and_never_shown(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(status=401))
    with pytest.raises(AuthError) as caught:
        asyncio.run(provider(wire).complete(request()))
    assert len(wire.requests) == 1
    message = str(caught.value)
    assert "refused" in message and "check ANTHROPIC_API_KEY" in message
    assert keys not in message and "[redacted]" in message  # the server echoed it


def test_a_bad_request_is_not_retried_and_says_what_to_check(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(status=400))
    with pytest.raises(BadRequest, match="max_tokens, temperature"):
        asyncio.run(provider(wire).complete(request()))
    assert len(wire.requests) == 1


def test_429_waits_as_long_as_retry_after_says(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(status=429, retry_after="1"))
    started = time.perf_counter()
    completion = asyncio.run(provider(wire).complete(request()))
    assert completion.text == "Hello from the wire."
    assert time.perf_counter() - started >= 1.0
    assert len(wire.requests) == 2


def test_a_retry_after_past_the_limit_fails_at_once(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(status=429, retry_after="3600"))
    with pytest.raises(RateLimited, match="asked to wait 3600 s") as caught:
        asyncio.run(provider(wire).complete(request()))
    assert caught.value.retry_after == 3600 and len(wire.requests) == 1


def test_500s_are_retried_with_backoff(wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(status=500), Fault(status=529)]
    assert asyncio.run(provider(wire).complete(request())).text == "Hello from the wire."
    assert len(wire.requests) == 3


def test_500s_past_the_attempts_give_up(wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(status=500)] * 3
    with pytest.raises(ProviderUnavailable, match=r"server error \(500.*gave up after 3 attempts"):
        asyncio.run(provider(wire).complete(request()))


def test_a_slow_server_times_out(wire: WireServer, keys: str) -> None:
    wire.faults += [Fault(delay=1.5)] * 2
    slow = Policy(timeout=0.3, attempts=2, base_delay=0.01)
    started = time.perf_counter()
    with pytest.raises(ProviderTimeout, match=r"no reply within 0\.3 s"):
        asyncio.run(provider(wire, slow).complete(request()))
    assert time.perf_counter() - started < 1.5


def test_a_stream_cut_before_any_text_is_retried(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(cut_after=0))
    text, _ = asyncio.run(collect(provider(wire), request()))
    assert text == "Hello from the wire." and len(wire.requests) == 2


def test_a_stream_cut_after_text_fails_without_a_retry(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(cut_after=2))
    seen: list[str] = []

    async def read() -> None:
        async for chunk in provider(wire).stream(request()):
            seen.append(chunk.text)

    with pytest.raises(ProviderUnavailable, match="already been delivered"):
        asyncio.run(read())
    assert "".join(seen) == "Hello from" and len(wire.requests) == 1


def test_a_stream_that_ends_without_message_stop_is_cut(wire: WireServer, keys: str) -> None:
    wire.faults.append(Fault(clean_end_after=2))
    policy = Policy(attempts=1)
    with pytest.raises(ProviderUnavailable, match="before message_stop"):
        asyncio.run(collect(provider(wire, policy), request()))


# -- a whole soul turn: every fault leaves the session as it was ---------------------------


FAULTS = {
    "401": [Fault(status=401)],
    "400": [Fault(status=400)],
    "429 past the limit": [Fault(status=429, retry_after="3600")],
    "500 three times": [Fault(status=500, retry_after="0")] * 3,
    "slow": [Fault(delay=1.0)] * 3,
    "cut mid-stream": [Fault(cut_after=3)],
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failing_turn_leaves_the_session_as_it_was(
    fault: str, wire: WireServer, keys: str, wired_soul: Callable[..., Path], tmp_path: Path
) -> None:
    path = wired_soul("anthropic/claude-test", wire.anthropic_url, timeout=0.3)
    wire.replies.append(REPLY)
    s = soul.load(path, model="anthropic/x", home=tmp_path / "home")
    session = s.session()
    assert session.turn_sync("Hi").reply == "Hello there, friend."
    assert wire.requests[-1].body["model"] == "x"  # --model replaced the spec, the slot kept base_url
    before = s.store.snapshot(session.id)
    wire.faults.extend(FAULTS[fault])

    async def streamed() -> None:
        async for _ in session.stream("Again"):
            pass

    with pytest.raises(soul.ProviderError):
        asyncio.run(streamed())
    assert s.store.snapshot(session.id) == before
    assert s.store.session(session.id).turns == 1
    wire.faults.clear()
    wire.replies.append(REPLY)
    assert session.turn_sync("Once more").turn == 2  # and the session carries on
    s.close()
