"""What the server does per event and per turn, in process: an event's JSON (converted without
`asdict`'s deep copy, redacted: the same text as `asdict` then `redact_data`), the fan-out to clients (a client too
far behind is dropped), and the loop clock that times a turn's own code."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

import pytest

from soul.runtime.events import CycleFinished, StepFinished, Token, TriggerFired
from soul.serve import hub, wire
from soul.serve.clock import LoopClock

SECRET = "serve-wire-secret-7d1c0e55"  # not key-shaped: found because the variable names it


@dataclasses.dataclass(frozen=True)
class Nested:
    note: str
    values: tuple[int, ...]


@pytest.mark.parametrize("event", [
    Token("reply", f"the key is {SECRET}, "),
    StepFinished("think", {"text": f"quoting {SECRET}", "hits": [{"id": 1, SECRET: (1.5, None)}], "obj": Nested("n", (1, 2))}, True),
    TriggerFired("bored", "five minutes of silence", ("ask", f"say {SECRET}")),
    CycleFinished("subconscious", 3, {"cycle": {"mood": "calm"}}, f"failed near {SECRET}", 0.5),
    wire.turn_failed(f"a {SECRET} in an error"),
], ids=lambda e: type(e).__name__ if not isinstance(e, dict) else e["type"])
def test_an_event_is_encoded_as_asdict_then_redact_would_encode_it(event: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_TEST_API_KEY", SECRET)
    text = wire.encode_event(event)
    as_asdict = event if isinstance(event, dict) else {"type": type(event).__name__, **dataclasses.asdict(event)}
    assert text == wire.encode(as_asdict)
    assert SECRET not in text and "[redacted]" in text
    assert json.loads(text)["type"] == (event["type"] if isinstance(event, dict) else type(event).__name__)


def test_a_client_too_far_behind_is_dropped_and_the_others_still_get_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "QUEUE_EVENTS", 3)

    async def go() -> None:
        slow, fast = hub.Client(), hub.Client()
        clients = {slow, fast}
        for n in range(5):
            hub.broadcast(clients, Token("reply", str(n)), "test")
            while not fast.queue.empty():  # the fast client's pump keeps up
                assert json.loads(fast.queue.get_nowait() or "null")["text"] == str(n)
        assert clients == {fast} and slow.closed and not fast.closed
        assert slow.queue.get_nowait() is None and slow.queue.empty()  # its backlog thrown away: it reloads

    asyncio.run(go())


def test_the_loop_clock_counts_a_coroutines_own_steps_not_its_waits() -> None:
    def busy(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    async def turn(clock: LoopClock) -> float:
        busy(0.02)
        await asyncio.sleep(0.1)  # another task's time, or a model's: not this turn's
        busy(0.02)
        return clock.loop_ms()

    async def go() -> tuple[float, float]:
        clock = LoopClock()
        started = time.perf_counter()
        inside = await asyncio.create_task(clock.run(turn(clock)))
        return inside, (time.perf_counter() - started) * 1000

    inside, wall = asyncio.run(go())
    assert 40 <= inside < wall - 90
