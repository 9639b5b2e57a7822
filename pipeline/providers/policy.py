"""One failure policy for every live provider: timeout, retries, circuit breaker.

Every number is a field of `Policy`; a model slot sets them with `timeout`, `retries`,
`backoff`, `breaker_failures` and `breaker_cooldown` (`Policy.with_options`).

- **Timeout** per call (`timeout` slot option, default 60 s); for a stream it bounds the wait
  for each next chunk, so a long reply that keeps coming is never cut.
- **Retries** on 429, 5xx, connection errors and timeouts, with exponential backoff and full
  jitter; a `retry-after` from the provider is honoured (waited exactly, not jittered), and one
  longer than `max_retry_after` fails at once, saying how long the provider asked to wait.
- **Circuit breaker** per provider+model (the cc-soul seed's numbers): after 3 consecutive
  failed calls it opens for 60 s and calls fail fast; then one probe goes through (half-open);
  its success closes the circuit, its failure opens it again.
- A **cut stream** is retried only if no text had been handed on yet; once some may have
  reached the user, a retry would show them a second, different reply, so the call fails.
- **Auth and bad-request errors** are never retried and never count against the breaker:
  they are the caller's to fix, and the message says how.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from soul.errors import (
    CircuitOpen,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from soul.providers.base import Chunk, Completion, Provider, Request

RETRYABLE = (ProviderTimeout, ProviderUnavailable, RateLimited)
# model slot option -> Policy field (validated by the blueprint schema's model options)
SLOT_OPTIONS: tuple[tuple[str, str, type], ...] = (
    ("timeout", "timeout", float),
    ("retries", "attempts", int),
    ("backoff", "base_delay", float),
    ("breaker_failures", "failure_threshold", int),
    ("breaker_cooldown", "cooldown", float),
)


@dataclass(frozen=True, slots=True)
class Policy:
    """How hard to try. Every field can be changed; `with_options` reads the slot's options."""

    timeout: float = 60.0
    attempts: int = 3  # the first try and up to two retries
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    failure_threshold: int = 3
    cooldown: float = 60.0

    def with_options(self, options: Mapping[str, Any]) -> Policy:
        """This policy with the slot's options applied: `timeout` (s), `retries` (after the
        first try), `backoff` (base delay, s), `breaker_failures`, `breaker_cooldown` (s)."""
        changes: dict[str, Any] = {}
        for option, name, kind in SLOT_OPTIONS:
            value = options.get(option)
            if value is not None:
                changes[name] = kind(value)
        if "attempts" in changes:
            changes["attempts"] += 1  # `retries: 0` is one attempt
        return replace(self, **changes) if changes else self

    def delay(self, attempt: int, retry_after: float | None, rng: Callable[[], float] = random.random) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), or None to give up now."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return ceiling * rng()  # full jitter: callers that failed together do not retry together


class Breaker:
    """The circuit of one provider+model: closed → open → half-open → closed (or open again)."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        self.probing = False
        self.last_error = ""
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self.probing or self.clock() - self.opened_at >= self.cooldown else "open"

    def admit(self, name: str) -> None:
        """Let a call through, or raise CircuitOpen. After the cooldown one probe goes through."""
        with self._lock:
            if self.opened_at is None:
                return
            waited = self.clock() - self.opened_at
            if waited >= self.cooldown and not self.probing:
                self.probing = True
                return
            left = max(0.0, self.cooldown - waited)
            why = "a probe call is under way" if self.probing else f"next try in {left:.0f} s"
            raise CircuitOpen(
                f"{name}: the circuit is open after {self.failures} failed calls in a row ({why}); "
                f"last error: {self.last_error}"
            )

    def succeeded(self) -> None:
        with self._lock:
            self.failures, self.opened_at, self.probing = 0, None, False

    def failed(self, error: BaseException) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = str(error)
            if self.probing or self.failures >= self.threshold:
                self.opened_at = self.clock()
            self.probing = False


_breakers: dict[tuple[str, int, float], Breaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(name: str, policy: Policy) -> Breaker:
    """The process-wide breaker of a provider+model (shared by every soul that calls it with
    the same breaker numbers; slots that configure other numbers get a breaker of their own)."""
    key = (name, policy.failure_threshold, policy.cooldown)
    with _breakers_lock:
        breaker = _breakers.get(key)
        if breaker is None:
            breaker = _breakers[key] = Breaker(policy.failure_threshold, policy.cooldown)
        return breaker


def reset_breakers() -> None:
    """Forget every breaker's state (tests; a long-running app after fixing its network)."""
    with _breakers_lock:
        _breakers.clear()


def _gave_up(error: ProviderError, attempts: int, why: str = "") -> ProviderError:
    message = f"{error} ({why or f'gave up after {attempts} attempt' + ('s' if attempts != 1 else '')})"
    if isinstance(error, RateLimited):
        return RateLimited(message, error.retry_after)
    return type(error)(message)


class Guarded(Provider):
    """A provider behind the policy. `resolve()` wraps every live provider in one."""

    def __init__(
        self,
        inner: Provider,
        name: str,
        policy: Policy | None = None,
        *,
        breaker: Breaker | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.inner = inner
        self.label = name
        self.policy = policy or Policy()
        self.breaker = breaker or breaker_for(name, self.policy)
        self.sleep = sleep
        self.rng = rng
        self.name = inner.name
        self.can_stream = inner.can_stream
        self.wants_grammar = inner.wants_grammar
        self.can_call_tools = inner.can_call_tools

    async def _backoff(self, error: ProviderError, attempt: int) -> None:
        """Wait before the next attempt, or raise if there is none."""
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        delay = self.policy.delay(attempt, retry_after, self.rng) if attempt < self.policy.attempts else None
        if delay is None:
            self.breaker.failed(error)
            why = (
                f"the provider asked to wait {retry_after:.0f} s, over the {self.policy.max_retry_after:.0f} s limit"
                if retry_after is not None and attempt < self.policy.attempts
                else ""
            )
            raise _gave_up(error, attempt, why) from error
        await self.sleep(delay)

    async def complete(self, request: Request) -> Completion:
        self.breaker.admit(self.label)
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(self.policy.timeout):
                    completion = await self.inner.complete(request)
            except TimeoutError:
                error: ProviderError = ProviderTimeout(f"{self.label}: no reply within {self.policy.timeout:g} s")
            except RETRYABLE as exc:
                error = exc
            else:
                self.breaker.succeeded()
                return completion
            await self._backoff(error, attempt)

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        self.breaker.admit(self.label)
        attempt = 0
        while True:
            attempt += 1
            delivered = False
            chunks = self.inner.stream(request).__aiter__()
            try:
                while True:
                    try:
                        async with asyncio.timeout(self.policy.timeout):
                            chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        self.breaker.succeeded()
                        return
                    except TimeoutError:
                        raise ProviderTimeout(f"{self.label}: no next chunk within {self.policy.timeout:g} s") from None
                    delivered = delivered or bool(chunk.text)
                    yield chunk
            except RETRYABLE as exc:
                error: ProviderError = exc
            finally:
                await chunks.aclose()  # type: ignore[attr-defined]
            if delivered:
                self.breaker.failed(error)
                raise _gave_up(error, attempt, "part of the reply had already been delivered, so it was not retried") from error
            await self._backoff(error, attempt)
