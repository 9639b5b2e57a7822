"""Running the units of a layer concurrently without paying for tasks that never wait.

`asyncio.gather` wraps every coroutine in a Task, which costs a few event-loop passes even
when the coroutine finishes without ever waiting (a cached provider, a scripted reply, a
non-LLM step). `gather_eagerly` starts each coroutine in place — as Python 3.12's eager task
factory does — and hands only the ones that actually wait to the event loop as Tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any


def _adopt(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], yielded: Any) -> asyncio.Future[Any]:
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


async def gather_eagerly(coros: Sequence[Coroutine[Any, Any, Any]]) -> list[Any]:
    """Run coroutines concurrently; results in order. The first error propagates after the
    others are cancelled, like `asyncio.gather` in a TaskGroup."""
    results: list[Any] = [None] * len(coros)
    waiting: list[tuple[int, asyncio.Future[Any]]] = []
    started = 0
    try:
        for coro in coros:
            started += 1
            try:
                yielded = coro.send(None)
            except StopIteration as done:
                results[started - 1] = done.value
                continue
            waiting.append((started - 1, _adopt(asyncio.get_running_loop(), coro, yielded)))
    except BaseException:
        for _, future in waiting:
            future.cancel()
        for coro in coros[started:]:
            coro.close()  # never started: no "coroutine was never awaited" warning
        raise
    if waiting:
        try:
            values = await asyncio.gather(*(future for _, future in waiting))
        except BaseException:
            for _, future in waiting:
                future.cancel()
            raise
        for (i, _), value in zip(waiting, values, strict=True):
            results[i] = value
    return results
