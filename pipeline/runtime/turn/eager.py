"""Running the units of a layer concurrently without paying for tasks that never wait.

`asyncio.gather` wraps every coroutine in a Task, which costs a few event-loop passes even
when the coroutine finishes without ever waiting (a cached provider, a scripted reply, a
non-LLM step). `gather_eagerly` starts each coroutine in place — as Python 3.12's eager task
factory does — and hands only the ones that actually wait to the event loop as Tasks
(`adopt`). `ScopeRunner.run` runs `start_eagerly`'s loop inline, with `adopt` and
`finish_waiting` (a call per layer cost a fan-out measurably); the tests here pin what both rest on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any


def adopt(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], yielded: Any) -> asyncio.Future[Any]:
    """A future for the rest of a coroutine that has just yielded `yielded`.

    A coroutine awaiting a future yields that future and expects to be resumed only once it is
    done; so the Task that takes the coroutine over is created from the future's done
    callback. A bare yield (`asyncio.sleep(0)`) is resumed by a Task at once.
    """
    if yielded is None:
        return loop.create_task(coro)
    # the protocol between a future and the Task stepping its awaiter: the Task clears this flag
    yielded._asyncio_future_blocking = False
    outer: asyncio.Future[Any] = loop.create_future()

    def settle(task: asyncio.Task[Any]) -> None:
        if outer.done():
            return
        if task.cancelled():
            outer.cancel()
        elif task.exception() is not None:
            outer.set_exception(task.exception())  # type: ignore[arg-type]
        else:
            outer.set_result(task.result())

    def resume(_: Any) -> None:
        task = loop.create_task(coro)
        task.add_done_callback(settle)

    def cancelled(future: asyncio.Future[Any]) -> None:
        if future.cancelled() and not yielded.done():
            yielded.cancel()  # the coroutine then sees CancelledError where it awaited

    yielded.add_done_callback(resume)
    outer.add_done_callback(cancelled)
    return outer


def start_eagerly(coros: Sequence[Coroutine[Any, Any, Any]], results: list[Any] | None = None) -> list[tuple[int, asyncio.Future[Any]]]:
    """Start each coroutine in place, in order: the ones that wait, as (position, future of
    its result); what the others returned goes into `results` (when given). On an error the
    started ones that wait are cancelled and the rest closed, then it propagates.

    Synchronous, so coroutines that all finish at once (a fan-out over a cached or scripted
    provider) pay for no coroutine of its own (`ScopeRunner.run` runs this loop inline)."""
    waiting: list[tuple[int, asyncio.Future[Any]]] = []
    started = 0
    try:
        for coro in coros:
            started += 1
            try:
                yielded = coro.send(None)
            except StopIteration as done:
                if results is not None:
                    results[started - 1] = done.value
                continue
            waiting.append((started - 1, adopt(asyncio.get_running_loop(), coro, yielded)))
    except BaseException:
        for _, future in waiting:
            future.cancel()
        for coro in coros[started:]:
            coro.close()  # never started: no "coroutine was never awaited" warning
        raise
    return waiting


async def finish_waiting(waiting: Sequence[tuple[int, asyncio.Future[Any]]], results: list[Any] | None = None) -> None:
    """Await the futures `start_eagerly` left (their values into `results`, when given); the
    first error propagates after the others are cancelled."""
    try:
        values = await asyncio.gather(*(future for _, future in waiting))
    except BaseException:
        for _, future in waiting:
            future.cancel()
        raise
    if results is not None:
        for (i, _), value in zip(waiting, values, strict=True):
            results[i] = value


async def gather_eagerly(coros: Sequence[Coroutine[Any, Any, Any]]) -> list[Any]:
    """Run coroutines concurrently; results in order. The first error propagates after the
    others are cancelled, like `asyncio.gather` in a TaskGroup."""
    results: list[Any] = [None] * len(coros)
    waiting = start_eagerly(coros, results)
    if waiting:
        await finish_waiting(waiting, results)
    return results
