"""A turn's memories are written after it returns; every read of the field waits for them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import soul
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges.memory_work import Queries, Writes, run_query

BLUEPRINT = """\
soul: rememberer
version: 1
memory:
  field: field
  store: {episodes: true}
steps:
  recall: {uses: memory.recall, with: {k: 3, region: context, mode: keyword, this_session: true}}
  reply: {uses: external_dialogue, after: [recall]}
"""


# -- Writes, on its own --------------------------------------------------------------------


def test_a_sessions_writes_run_in_the_order_they_were_submitted() -> None:
    writes, order = Writes(), []
    gate = threading.Event()

    async def main() -> None:
        first = writes.submit("s", lambda: (gate.wait(5), order.append(1)))
        second = writes.submit("s", lambda: order.append(2))  # waits for the first, though free to start
        await asyncio.sleep(0.05)
        assert order == [] and not second.done()
        gate.set()
        await asyncio.wrap_future(second)
        assert first.done()

    asyncio.run(main())
    assert order == [1, 2]


def test_two_sessions_writes_do_not_wait_for_each_other() -> None:
    writes, order = Writes(), []
    gate = threading.Event()

    async def main() -> None:
        writes.submit("a", lambda: (gate.wait(5), order.append("a")))
        other = writes.submit("b", lambda: order.append("b"))
        await asyncio.wrap_future(other)  # done while a's write still waits
        assert order == ["b"]
        gate.set()

    asyncio.run(main())  # the loop's executor is joined: a's write ran to its end
    assert order == ["b", "a"]


def test_a_read_waits_for_every_write_submitted_before_it_but_not_inside_one() -> None:
    writes, seen = Writes(), []
    gate = threading.Event()

    def write() -> None:
        gate.wait(5)
        writes.wait()  # a write reading the field: must not wait for itself
        seen.append("written")

    async def main() -> None:
        writes.submit("s", write)
        reader = asyncio.get_running_loop().run_in_executor(None, lambda: (writes.wait(), seen.append("read")))
        await asyncio.sleep(0.05)
        assert seen == [] and writes.pending == 1
        gate.set()
        await reader

    asyncio.run(main())
    assert seen == ["written", "read"] and writes.pending == 0


def test_a_failed_write_hands_its_error_to_the_waiter() -> None:
    writes = Writes()

    async def main() -> None:
        with pytest.raises(ValueError, match="broken"):
            await asyncio.wrap_future(writes.submit("s", lambda: (_ for _ in ()).throw(ValueError("broken"))))

    asyncio.run(main())
    writes.wait()  # nothing left pending


def test_idle_says_whether_a_write_is_still_to_run() -> None:
    writes, go = Writes(), threading.Event()
    assert writes.idle

    async def main() -> None:
        done = writes.submit("s", go.wait)
        assert not writes.idle and writes.pending == 1  # the recall would go to a worker thread
        go.set()
        await asyncio.wrap_future(done)
        assert writes.idle and writes.pending == 0  # done, though still listed until the next wait

    asyncio.run(main())


# -- in a session --------------------------------------------------------------------------

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")


def test_the_turn_returns_before_its_memories_are_written_and_the_next_recall_sees_them(
        write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(BLUEPRINT)
    provider = ScriptedProvider(["<external_dialogue>Miso sounds lovely.</external_dialogue>",
                                 "<external_dialogue>Miso, the tabby.</external_dialogue>"])
    s = soul.load(path, provider=provider, home=soul_home)
    field = s.memory_field()  # opened before the turns: its write lock is the real one they take
    session = s.session(user="ada")

    async def main() -> None:
        with field._lock:  # the field is busy elsewhere (a compaction, another process's import)
            first = await asyncio.wait_for(session.turn("My cat is called Miso."), 10)
            assert first.reply == "Miso sounds lovely."
            assert s.services.memory.writes.pending == 1  # the write waits for the field, not the turn
        second = await session.turn("What is my cat called?")  # its recall waits for the write
        assert any("Miso" in h["text"] for h in second.steps["recall"]["hits"])
        await session.close()

    asyncio.run(main())
    assert field.stats()["memories"] == 2
    s.close()


def test_settle_waits_for_the_memories_of_the_last_turn(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(BLUEPRINT)
    s = soul.load(path, provider=ScriptedProvider(["<external_dialogue>Noted.</external_dialogue>"]), home=soul_home)
    field = s.memory_field()
    session = s.session(user="ada")
    held, release = threading.Event(), threading.Event()

    def busy() -> None:  # the field's write lock, held by another thread until told
        with field._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=busy)
    holder.start()
    held.wait(5)

    async def main() -> None:
        await session.turn("My cat is called Miso.")
        assert s.services.memory.writes.pending == 1
        release.set()
        await session.settle()
        assert s.services.memory.writes.pending == 0

    asyncio.run(main())
    holder.join()
    assert field.stats()["memories"] == 1
    s.close()


# -- a turn's queries: on the loop when quick ----------------------------------------------


def test_a_warmed_query_runs_on_the_loop_and_any_other_in_a_worker_thread() -> None:
    queries, threads = Queries(), []
    loop_thread = threading.get_ident()

    def ask() -> str:
        threads.append(threading.get_ident())
        return "hits"

    async def main() -> None:
        queries.warm("warm text", lambda text: None)
        assert await run_query(queries, "warm text", lambda: True, ask) == "hits"  # warmed, quick
        assert await run_query(queries, "warm text", lambda: True, ask) == "hits"  # each warming answers once
        queries.warm("big field", lambda text: None)
        await run_query(queries, "big field", lambda: False, ask)  # warmed, but the field is not quick
        queries.warm("broken", lambda text: (_ for _ in ()).throw(OSError("model file gone")))
        await run_query(queries, "broken", lambda: True, ask)  # the query says what failed, in its thread

    asyncio.run(main())
    assert threads[0] == loop_thread
    assert all(t != loop_thread for t in threads[1:]) and len(threads) == 4


def test_a_known_vector_is_not_embedded_again() -> None:
    queries, embedded = Queries(), []

    async def main() -> None:
        queries.warm("cached", embedded.append, known=True)
        assert await queries.warmed("cached")

    asyncio.run(main())
    assert embedded == []


def test_a_turns_recall_embeds_its_query_at_the_start_and_searches_on_the_loop(
        write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(BLUEPRINT.replace("mode: keyword, ", ""))  # hybrid: the query needs its vector
    s = soul.load(path, provider=ScriptedProvider(["<external_dialogue>Noted.</external_dialogue>"] * 3), home=soul_home)
    session = s.session(user="ada")
    session.turn_sync("My cat is called Miso.")  # opens the field (in a worker thread)
    field = s.memory_field()
    embedder = field.embedder
    question = "What is my cat called? (asked once, in test_memory_writes)"  # in no cache yet
    assert not embedder.knows(question)
    searched: list[tuple[int, bool]] = []
    recall = field.recall

    def spied(*args, **kwargs):  # type: ignore[no-untyped-def]
        searched.append((threading.get_ident(), embedder.knows(args[0])))
        return recall(*args, **kwargs)

    field.recall = spied  # the real recall, with the thread it ran on and what it found cached

    async def main() -> int:
        await session.turn(question)
        await session.close()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert searched == [(loop_thread, True)]  # on the loop, its query's vector warmed before it
    s.close()
