"""gather_eagerly: like asyncio.gather, without tasks for coroutines that never wait."""

from __future__ import annotations

import asyncio

import pytest

from soul.runtime.turn.eager import gather_eagerly


async def instant(x: int) -> int:
    return x * 2


async def sleeper(x: int, delay: float) -> int:
    await asyncio.sleep(delay)
    return x


async def yields_once(x: int) -> int:
    await asyncio.sleep(0)
    return x


async def awaits_a_future(future: asyncio.Future[int]) -> int:
    return await future + 1


async def fails(after: float) -> int:
    await asyncio.sleep(after)
    raise ValueError("boom")


def test_results_come_back_in_order_for_every_kind_of_coroutine() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        loop.call_later(0.01, future.set_result, 41)
        return await gather_eagerly([instant(1), sleeper(2, 0.02), yields_once(3), awaits_a_future(future), instant(5)])

    assert asyncio.run(main()) == [2, 2, 3, 42, 10]


def test_waiting_coroutines_run_concurrently() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await gather_eagerly([sleeper(i, 0.1) for i in range(5)])
        return loop.time() - start

    assert asyncio.run(main()) < 0.3


def test_an_error_propagates_and_cancels_the_others() -> None:
    finished = []

    async def slow() -> None:
        await asyncio.sleep(0.5)
        finished.append(True)

    async def main() -> None:
        with pytest.raises(ValueError, match="boom"):
            await gather_eagerly([slow(), fails(0.01)])
        await asyncio.sleep(0.6)

    asyncio.run(main())
    assert finished == []


def test_an_immediate_error_closes_the_coroutines_not_started() -> None:
    async def bad() -> int:
        raise KeyError("now")

    later = instant(1)

    async def main() -> None:
        with pytest.raises(KeyError):
            await gather_eagerly([bad(), later])

    asyncio.run(main())
    assert later.cr_frame is None  # closed, so no "never awaited" warning


def test_cancelling_the_gather_cancels_a_coroutine_waiting_on_a_future() -> None:
    seen = []

    async def waiter(future: asyncio.Future[int]) -> int:
        try:
            return await future
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        task = asyncio.ensure_future(gather_eagerly([waiter(future), sleeper(1, 10)]))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert seen == ["cancelled"]
