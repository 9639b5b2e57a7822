"""Memory beside `overhead.py`'s times: what a step and a claudius turn allocate, what they keep,
and what an open session holds (tracemalloc, which slows everything down: no time is taken).

- peak: the most a run allocated above what was live when it began (`tracemalloc.reset_peak`
  before it, the peak after), the median over the runs;
- kept: what stayed allocated, per run, from before the first measured run to after the last
  (a collection before each reading), once the bounded caches are warm;
- a claudius turn: turns 2 to 31 of one conversation, a new line each, after 40 others (what a
  turn reads back grows with it, and the memory field by a memory a turn: `overhead_talk`); what
  it keeps, and how much of that the memory field keeps (allocated in `soul.engines.resonance`);
- an open session: what 100 new sessions that each made one turn hold, per session (tracemalloc,
  and the process's resident set from /proc, which also counts SQLite's page cache).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from overhead_talk import conversation_lines

import soul


def _resident() -> int:
    """The process's resident set in bytes (0 where /proc is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


async def _peaks_and_kept(run: Callable[[], Awaitable[Any]], runs: int,
                          settle: Callable[[], Any] | None = None) -> tuple[float, float]:
    """(median peak bytes of a run, bytes kept per run), tracemalloc already on (`settle`:
    what finishes a run's work left to a thread, before each reading of what is kept)."""
    if settle is not None:
        settle()
    gc.collect()
    start = tracemalloc.get_traced_memory()[0]
    peaks = []
    for _ in range(runs):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        await run()
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
    if settle is not None:
        settle()
    gc.collect()
    return statistics.median(peaks), (tracemalloc.get_traced_memory()[0] - start) / runs


CONVERSATION = 30  # the turns of one claudius conversation measured (after its first)
WARM_TURNS = 40  # new lines said before them: the memory field holds a few dozen memories
_FIELD = os.sep + os.path.join("engines", "resonance") + os.sep  # the memory engine's modules


def measure(folder: Path, graph_yaml: str, provider: Any, claudius_provider: Any, runs: int) -> dict[str, float]:
    """The memory figures: step peak (B) and kept per run (B) of the 3-step chain in memory;
    a claudius turn's peak and kept (B); an open session's bytes (tracemalloc, resident)."""
    from soul.runtime.turn import ScopeRunner, TurnState, context_for

    path = folder / "memory-chain.yaml"
    path.write_text(graph_yaml)
    s = soul.load(path, provider=provider, home=folder / "home-memory-chain")
    session = s.session(user="ada")
    session.turn_sync("Is everything fine?")
    snapshot = s.store.snapshot(session.id, ttl_hours=s.blueprint.memory_ttl_hours)
    ctx = context_for(s.plan, snapshot, "Is everything fine?", "message")
    steps = len(s.plan.turn.steps)

    async def graph() -> None:
        await ScopeRunner(s.plan, s.plan.turn, s.services, None).run(TurnState(ctx, {}))

    c = soul.load("claudius", provider=claudius_provider, home=folder / "home-memory-claudius")
    text = "Hi, I'm Ada. I build compilers."
    out: dict[str, float] = {}

    async def go() -> None:
        for _ in range(max(200, runs // 4)):  # warm: imports, template and text caches
            await graph()
        # the graph first, before the claudius soul opens its memory field: the field's graph
        # flushes its Hebbian edges from a thread of its own, whose allocations would count here
        tracemalloc.start()
        try:
            peak, kept = await _peaks_and_kept(graph, max(runs, 2000))  # long enough for bounded caches to even out
            out["step peak B"], out["run kept B"] = peak / steps, kept
        finally:
            tracemalloc.stop()
        talking = c.session(user="ada")
        for _ in range(13):
            await talking.turn(text)
        # a conversation's worth of new lines first: the memory field past its first growth
        lines = iter(conversation_lines(WARM_TURNS + CONVERSATION))
        writes = c.services.memory.for_user("ada").writes
        for i in range(WARM_TURNS):
            if i % 12 == 0:
                talking = c.session(user="ada")
                await talking.turn(text)
            await talking.turn(next(lines))
        writes.wait()
        tracemalloc.start()
        try:
            talking = c.session(user="ada")
            await talking.turn(text)  # the first turn writes the user model: not a typical turn
            # turns 2 to 31 of one conversation, whatever the run's size: a turn reads its
            # session back (working memory, the history), so what it allocates grows with it
            # a new line every turn (`overhead_talk`): the field grows by a memory a turn; the
            # last turn's memory write is waited for first, so a turn's peak holds it too

            async def next_turn() -> None:
                writes.wait()
                await talking.turn(next(lines))

            writes.wait()
            gc.collect()
            first = tracemalloc.take_snapshot()
            peak, kept = await _peaks_and_kept(next_turn, CONVERSATION, writes.wait)
            out["turn peak B"], out["turn kept B"] = peak, kept
            # what the memory field kept of it (its vectors, keyword index, graph, the embedder's
            # cache), told by the module that allocated it
            grown = tracemalloc.take_snapshot().compare_to(first, "filename")
            field = sum(d.size_diff for d in grown if _FIELD in (d.traceback[0].filename or ""))
            out["turn kept by the field B"] = field / CONVERSATION
            gc.collect()
            before, resident = tracemalloc.get_traced_memory()[0], _resident()
            opened = []
            for _ in range(100):
                fresh = c.session(user="ada")
                await fresh.turn(text)
                opened.append(fresh)
            # the last turns' memory writes run in a worker thread after them: what one holds
            # while it runs is the write's, and whether it is still running when the memory is
            # read is timing (the row scattered 27-33 KiB with it); settled first, it is not
            writes.wait()
            gc.collect()
            out["session B"] = (tracemalloc.get_traced_memory()[0] - before) / len(opened)
            out["session resident B"] = (_resident() - resident) / len(opened)
        finally:
            tracemalloc.stop()

    asyncio.run(go())
    s.close()
    c.close()
    return out
