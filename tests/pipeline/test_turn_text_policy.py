"""Issue 12 (items 6, 2, 15): lone surrogates become U+FFFD before anything is shown or stored;
framework time is never negative; remembering runs off the event loop; an interrupted turn
stores nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from souls import claudius_reply, fan_of_three

import soul
from soul.providers.base import Completion, Provider, Request, Usage
from soul.providers.scripted import ScriptedProvider
from soul.runtime.events import Token
from soul.runtime.surrogates import replace_lone_surrogates
from soul.runtime.turn import busy_seconds

INVALID_UTF8 = b"caf\xe9 \xff\xfe".decode("utf-8", "surrogateescape")  # as a latin-1 terminal gives it


def claudius(replies: list[str], home: Path) -> tuple[soul.Soul, ScriptedProvider]:
    provider = ScriptedProvider(replies)
    return soul.load("claudius", provider=provider, home=home), provider


@pytest.mark.parametrize("text", [INVALID_UTF8, "lone \ud83d high", "lone \ude00 low", "\udfff" * 1000])
def test_a_message_with_lone_surrogates_commits_with_replacements(text: str, soul_home: Path) -> None:
    s, provider = claudius([claudius_reply()], soul_home)
    session = s.session(user="ada")
    result = session.turn_sync(text)
    assert result.turn == 1
    said = [record.content for _, record, _ in s.store.messages(session.id) if record.tag == "user"]
    assert said == [replace_lone_surrogates(text)] and "\ufffd" in said[0]
    said[0].encode("utf-8")
    assert "\ufffd" in provider.requests[0].messages[-1].content


def test_a_reply_with_lone_surrogates_streams_and_commits(soul_home: Path) -> None:
    s, _ = claudius([claudius_reply("Bad \udc80 bytes and \ud800.")], soul_home)
    session = s.session(user="ada")

    async def go() -> list[object]:
        return [event async for event in session.stream("hi")]

    tokens = "".join(e.text for e in asyncio.run(go()) if isinstance(e, Token))
    assert tokens == "Bad \ufffd bytes and \ufffd."
    stored = [r.content for _, r, _ in s.store.messages(session.id) if r.tag == "external_dialogue"]
    assert stored == ["Bad \ufffd bytes and \ufffd."]


def test_valid_text_is_kept_as_written() -> None:
    text = "é 😀 \U0010ffff"
    assert replace_lone_surrogates(text) is text


def test_busy_time_counts_overlapping_calls_once() -> None:
    assert busy_seconds([(0.0, 1.0), (0.5, 1.5), (0.2, 0.4), (3.0, 4.0)]) == pytest.approx(2.5)
    assert busy_seconds([]) == 0.0


class Slow(Provider):
    name = "slow"

    def __init__(self, delay: float, replies: dict[str, str]) -> None:
        self.delay, self.replies = delay, replies

    async def complete(self, request: Request) -> Completion:
        await asyncio.sleep(self.delay)
        return Completion(self.replies[request.tags[0]], Usage())


def test_framework_time_is_not_negative_when_calls_run_in_parallel(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(fan_of_three("reply: {uses: external_dialogue, after: [a, b, c]}"))
    replies = {"mental_query": "<mental_query>true</mental_query>", "external_dialogue": "<external_dialogue>ok</external_dialogue>"}
    s = soul.load(path, provider=Slow(0.1, replies), home=soul_home)
    trace = s.session().turn_sync("go").trace
    assert trace is not None
    assert 0 <= trace.summary()["framework_ms"] < trace.total_ms


def test_remembering_runs_off_the_event_loop(soul_home: Path) -> None:
    s, _ = claudius([claudius_reply()], soul_home)
    memory = s.services.memory
    assert memory is not None
    threads: list[str] = []
    original = memory.remember

    def remember(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    memory.remember = remember  # type: ignore[method-assign]
    s.session(user="ada").turn_sync("hi")
    assert threads and threads[0] != threading.main_thread().name


class Interrupting(Provider):
    name = "interrupting"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def complete(self, request: Request) -> Completion:
        raise self.error


def test_ctrl_c_mid_turn_stores_nothing(soul_home: Path) -> None:
    s = soul.load("claudius", provider=Interrupting(KeyboardInterrupt()), home=soul_home)
    session = s.session(user="ada")
    with pytest.raises(KeyboardInterrupt):
        session.turn_sync("hi")
    assert s.store.session(session.id).turns == 0 and s.store.messages(session.id) == []


def test_a_cancelled_turn_stores_nothing(soul_home: Path) -> None:
    s = soul.load("claudius", provider=Slow(5.0, {}), home=soul_home)
    session = s.session(user="ada")

    async def go() -> None:
        task = asyncio.create_task(session.turn("hi"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.perf_counter()
    asyncio.run(go())
    assert time.perf_counter() - started < 4
    assert s.store.session(session.id).turns == 0 and s.store.messages(session.id) == []
