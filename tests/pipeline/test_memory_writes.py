"""A turn's memories are written after it returns; every read of the field waits for them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import soul
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges.memory_writes import Writes

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
