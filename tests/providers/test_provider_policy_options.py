"""The failure policy's numbers set per model slot in a blueprint: `timeout`, `retries`,
`backoff`, `breaker_failures`, `breaker_cooldown` — validated by the schema, applied by
`Policy.with_options`, and obeyed against the wire server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPLY
from wire_server import Fault, WireServer

import soul
from soul.compiler.validation import validate
from soul.errors import CircuitOpen, ProviderUnavailable
from soul.providers import Policy, Request, resolve
from soul.providers.policy import Guarded, breaker_for
from soul.runtime.turn.prompting.prompt import Message

pytest.importorskip("openai")


def test_slot_options_set_the_policy() -> None:
    policy = Policy().with_options(
        {"timeout": 7, "retries": 4, "backoff": 0.1, "breaker_failures": 5, "breaker_cooldown": 12.5, "temperature": 0.3}
    )
    assert policy == Policy(timeout=7.0, attempts=5, base_delay=0.1, failure_threshold=5, cooldown=12.5)
    assert Policy().with_options({"retries": 0}).attempts == 1  # no retry: one attempt
    assert Policy().with_options({}) == Policy()  # the seed's numbers by default: 3 attempts, 3 failures, 60 s


def test_resolve_applies_them(wire: WireServer, keys: str) -> None:
    provider = resolve("openai/gpt-test", {"base_url": wire.openai_url, "retries": 1, "breaker_failures": 2, "breaker_cooldown": 9})
    assert isinstance(provider, Guarded)
    assert provider.policy.attempts == 2
    assert (provider.breaker.threshold, provider.breaker.cooldown) == (2, 9.0)


def test_slots_with_other_breaker_numbers_get_their_own_breaker() -> None:
    default = breaker_for("openai/m", Policy())
    assert breaker_for("openai/m", Policy()) is default  # shared per provider+model
    strict = breaker_for("openai/m", Policy(failure_threshold=1))
    assert strict is not default and strict.threshold == 1 and default.threshold == 3


@pytest.mark.parametrize(
    ("option", "value", "complaint"),
    [
        ("retries", -1, "models.main.retries: -1 is less than the minimum of 0"),
        ("retries", 1.5, "models.main.retries: expected integer, got a number"),
        ("backoff", "fast", "models.main.backoff: expected number, got a string"),
        ("breaker_failures", 0, "models.main.breaker_failures: 0 is less than the minimum of 1"),
        ("breaker_cooldown", 0, "models.main.breaker_cooldown: 0 is less than or equal to the minimum of 0"),
        ("retry", 2, "models.main: unknown key 'retry' (hint: did you mean 'retries'?)"),
    ],
)
def test_the_schema_checks_them(
    option: str, value: object, complaint: str, wired_soul: Callable[..., Path]
) -> None:
    checked = validate(wired_soul("openai/gpt-test", "http://127.0.0.1:9/v1", **{option: value}))
    assert [f"{d.message} (hint: {d.hint})" if d.hint else d.message for d in checked.errors] == [complaint]


def test_valid_options_pass_the_schema(wired_soul: Callable[..., Path]) -> None:
    path = wired_soul(
        "openai/gpt-test", "http://127.0.0.1:9/v1",
        retries=0, backoff=0.05, breaker_failures=1, breaker_cooldown=30, timeout=2, seed=3, repeat_penalty=1.1, n_ctx=2048,
    )
    checked = validate(path)
    assert checked.ok, [str(d) for d in checked.diagnostics]


def test_a_soul_obeys_its_slots_numbers(
    wire: WireServer, keys: str, wired_soul: Callable[..., Path], tmp_path: Path
) -> None:
    # no retries and a breaker that opens at the first failure: one request, then fail fast
    path = wired_soul("openai/gpt-test", wire.openai_url, retries=0, breaker_failures=1, breaker_cooldown=30)
    s = soul.load(path, home=tmp_path / "home")
    try:
        session = s.session()
        wire.faults.append(Fault(status=503))
        with pytest.raises(ProviderUnavailable, match="gave up after 1 attempt"):
            session.turn_sync("Hi")
        assert len(wire.requests) == 1
        wire.replies.append(REPLY)
        with pytest.raises(CircuitOpen, match="after 1 failed calls in a row"):
            session.turn_sync("Hi again")
        assert len(wire.requests) == 1  # the open circuit sent nothing
    finally:
        s.close()


def test_backoff_sets_the_first_delay(wire: WireServer, keys: str) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    provider = resolve("openai/gpt-test", {"base_url": wire.openai_url, "backoff": 0.2, "retries": 2})
    assert isinstance(provider, Guarded)
    provider.sleep, provider.rng = sleep, lambda: 1.0
    wire.faults += [Fault(status=500), Fault(status=500)]

    completion = asyncio.run(provider.complete(Request("openai/gpt-test", (Message("user", "hi"),))))
    assert completion.text == "Hello from the wire."
    assert slept == [0.2, 0.4]  # base, then doubled (full jitter at its ceiling here)
