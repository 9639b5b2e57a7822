"""A turn's start as one conversation grows: reading the session's working memory into the
turn's context (its regions, its turns after the running summary).

At the start of each turn of one claudius conversation (zero-latency provider, a new line a
turn), the session's working memory is read as the turn reads it — on from the reading kept
from the last turn, by what the last commit added (`runtime/turn/memory_reading.py`) — and
beside it read whole, as every turn read it before it was kept. The table gives medians over
the ten turns up to each mark.

Run: python benchmarks/long_conversation.py [--turns 200]
Goal (issue 26: "what a session's turns share is kept between turns and updated by the
commit"): the kept reading stays flat as the conversation grows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from overhead import ZeroLatency  # the benchmarks' own modules, beside this one
from overhead_talk import conversation_lines


def run(turns: int) -> list[tuple[int, int, float, float]]:
    import soul
    from soul.runtime.turn import context as context_module
    from soul.runtime.turn.memory_reading import MemoryReading, kept_reading

    kept_times: list[float] = []
    whole_times: list[float] = []
    entries: list[int] = []
    original = context_module.context_for

    def timed(plan: Any, snapshot: Any, text: str, kind: str) -> Any:
        memory, user = snapshot.memory, snapshot.session.user
        last = kept_reading(snapshot.session.id)
        # what this turn's start reads: on from the last turn's reading (a reading is never
        # changed once made, so reading it here leaves the turn's own reading as it would be);
        # both ways once untimed first, so neither pays for the caches the turn before left cold
        (last or MemoryReading(user)).extended(memory, user).turns()
        MemoryReading(user).extended(memory, user).turns()
        started = time.perf_counter()
        kept = (last or MemoryReading(user)).extended(memory, user)
        kept.turns()
        kept_times.append(time.perf_counter() - started)
        # the same snapshot read whole, as every turn read it before
        started = time.perf_counter()
        whole = MemoryReading(user).extended(memory, user)
        whole.turns()
        whole_times.append(time.perf_counter() - started)
        entries.append(len(memory))
        return original(plan, snapshot, text, kind)

    context_module.context_for = timed  # start_turn looks it up in its module at each call
    rows = []
    with tempfile.TemporaryDirectory() as home:
        s = soul.load("claudius", provider=ZeroLatency(claudius=True), home=Path(home))
        try:
            bridge = s.services.memory.for_user("ada")
            lines = conversation_lines(turns)

            async def talk() -> None:
                session = s.session(user="ada")
                await session.turn("Hi, I'm Ada. I build compilers.")
                for n, text in enumerate(lines[: turns - 1], 2):
                    bridge.writes.wait()
                    await session.turn(text)
                    if n % 10 == 0 or n == turns:
                        print(f"\r{n}/{turns} turns", end="", file=sys.stderr, flush=True)

            asyncio.run(talk())
            print(file=sys.stderr)
        finally:
            context_module.context_for = original
            s.close()
    marks = [m for m in (10, 25, 50, 100, 200, 400, 800) if m <= turns] or [turns]
    for mark in marks:
        window = slice(max(0, mark - 10), mark)
        rows.append((mark, entries[mark - 1], statistics.median(kept_times[window]) * 1e6,
                     statistics.median(whole_times[window]) * 1e6))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    started = time.time()
    rows = run(args.turns)
    load = os.getloadavg()[0]
    print(f"# A turn's start as one conversation grows — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"machine: {os.cpu_count()} cores, load average {load:.2f}; Python {sys.version.split()[0]}\n")
    print("| turn | working-memory entries | read on from the last turn, µs | read whole, µs |")
    print("|---|---|---|---|")
    for mark, n, kept, whole in rows:
        print(f"| {mark} | {n} | {kept:.1f} | {whole:.1f} |")
    first, last = rows[0], rows[-1]
    flat = last[2] <= 2 * first[2]
    print(f"\nGoal: the kept reading stays flat — turn {last[0]} / turn {first[0]} = {last[2] / first[2]:.2f}x "
          f"({'yes' if flat else 'NO'}); read whole it grows {last[3] / first[3]:.1f}x. "
          f"({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
