"""The failure policy: the breaker's state machine, backoff and jitter, and the Guarded wrapper
around a provider that fails on demand (a test double of the Provider interface, not an SDK)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from soul.errors import AuthError, CircuitOpen, ProviderTimeout, ProviderUnavailable, RateLimited
from soul.providers.base import Chunk, Completion, Provider, Request, Usage
from soul.providers.policy import Breaker, Guarded, Policy
from soul.runtime.turn.prompting.prompt import Message

REQUEST = Request("test/model", (Message("user", "hi"),))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Flaky(Provider):
    """Raises the queued errors in turn, then answers."""

    name = "flaky"
    can_stream = True

    def __init__(self, *errors: Exception, hang: float = 0.0) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.hang = hang

    async def complete(self, request: Request) -> Completion:
        self.calls += 1
        await asyncio.sleep(self.hang)
        if self.errors:
            raise self.errors.pop(0)
        return Completion("ok", Usage())

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        self.calls += 1
        yield Chunk("o")
        if self.errors:
            raise self.errors.pop(0)
        yield Chunk("k", Usage())


def guarded(inner: Provider, policy: Policy | None = None, clock: Clock | None = None) -> tuple[Guarded, list[float]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    policy = policy or Policy()
    breaker = Breaker(policy.failure_threshold, policy.cooldown, clock or Clock())
    return Guarded(inner, "test/model", policy, breaker=breaker, sleep=sleep, rng=lambda: 0.5), slept


def test_the_breaker_opens_after_three_failures_and_probes_after_the_cooldown() -> None:
    clock = Clock()
    breaker = Breaker(3, 60.0, clock)
    for _ in range(2):
        breaker.admit("m")
        breaker.failed(ProviderUnavailable("boom"))
    assert breaker.state == "closed"
    breaker.admit("m")
    breaker.failed(ProviderUnavailable("boom"))
    assert breaker.state == "open"
    with pytest.raises(CircuitOpen, match=r"open after 3 failed calls in a row \(next try in 60 s\); last error: boom"):
        breaker.admit("m")
    clock.now += 59.9
    with pytest.raises(CircuitOpen):
        breaker.admit("m")
    clock.now += 0.1
    assert breaker.state == "half-open"
    breaker.admit("m")  # the probe
    with pytest.raises(CircuitOpen, match="a probe call is under way"):
        breaker.admit("m")
    breaker.failed(ProviderUnavailable("still down"))  # the probe failed: open again
    assert breaker.state == "open"
    clock.now += 60
    breaker.admit("m")
    breaker.succeeded()  # the probe worked: closed
    assert breaker.state == "closed" and breaker.failures == 0
    breaker.admit("m")


def test_the_breakers_numbers_are_configurable() -> None:
    clock = Clock()
    breaker = Breaker(1, 5.0, clock)
    breaker.failed(ProviderTimeout("slow"))
    assert breaker.state == "open"
    clock.now += 5
    assert breaker.state == "half-open"


def test_backoff_is_exponential_with_full_jitter_and_honours_retry_after() -> None:
    policy = Policy(base_delay=0.5, max_delay=3.0, max_retry_after=30)
    assert [policy.delay(n, None, lambda: 1.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(2, None, lambda: 0.25) == 0.25
    assert policy.delay(1, 7.0) == 7.0
    assert policy.delay(1, 31.0) is None
    assert Policy().with_options({"timeout": 5}).timeout == 5.0


def test_retryable_errors_are_retried_then_succeed() -> None:
    inner = Flaky(ProviderUnavailable("500"), RateLimited("429", retry_after=2.0))
    provider, slept = guarded(inner)
    assert asyncio.run(provider.complete(REQUEST)).text == "ok"
    assert inner.calls == 3 and slept == [0.25, 2.0]  # jittered backoff, then retry-after exactly


def test_auth_errors_are_not_retried_and_do_not_trip_the_breaker() -> None:
    inner = Flaky(*[AuthError("no key")] * 5)
    provider, _ = guarded(inner)
    for _ in range(5):
        with pytest.raises(AuthError):
            asyncio.run(provider.complete(REQUEST))
    assert inner.calls == 5 and provider.breaker.state == "closed"


def test_three_failed_calls_open_the_circuit_and_calls_then_fail_fast() -> None:
    clock = Clock()
    inner = Flaky(*[ProviderUnavailable("down")] * 3)
    provider, _ = guarded(inner, Policy(attempts=1), clock)
    for _ in range(3):
        with pytest.raises(ProviderUnavailable):
            asyncio.run(provider.complete(REQUEST))
    with pytest.raises(CircuitOpen):
        asyncio.run(provider.complete(REQUEST))
    assert inner.calls == 3  # the open circuit never reached the provider
    clock.now += 60
    assert asyncio.run(provider.complete(REQUEST)).text == "ok"  # the probe succeeds
    assert provider.breaker.state == "closed"


def test_the_timeout_bounds_each_call() -> None:
    provider, _ = guarded(Flaky(hang=1.0), Policy(timeout=0.05, attempts=2))
    with pytest.raises(ProviderTimeout, match=r"no reply within 0.05 s \(gave up after 2 attempts\)"):
        asyncio.run(provider.complete(REQUEST))


def test_a_stream_is_not_retried_once_text_went_out() -> None:
    inner = Flaky(ProviderUnavailable("cut"))
    provider, slept = guarded(inner)

    async def read() -> list[str]:
        return [c.text async for c in provider.stream(REQUEST)]

    with pytest.raises(ProviderUnavailable, match="already been delivered"):
        asyncio.run(read())
    assert inner.calls == 1 and slept == []
