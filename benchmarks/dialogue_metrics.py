"""Dialogue metrics at length: what the metrics of a 10,000-turn dialogue cost, read whole and
as the runner and `soul serve` read them (incrementally, after each turn), beside the old
all-pairs circularity that made them quadratic.

Run: python benchmarks/dialogue_metrics.py [--turns 10000] [--words 40] [--runs 3]
Goal (issue 24.7): a 10,000-turn dialogue's metrics in well under 100 ms, linear in the turns.

Rows:
- `first read`: `RunningMetrics` over the whole transcript, as on the first request after a
  saved dialogue is resumed (one pass: every turn's words read once);
- `after one more turn`: `compute_metrics` on the transcript grown by one turn (what the
  runner asks after every turn, and the server's GET after it): the new turn's work plus
  the check that the first turns are the ones already read;
- `series after one more turn`: `metric_series` likewise;
- `old all-pairs circularity`: the whole-transcript pair loop the metrics used before, at a
  few lengths (it grows with the square of the turns; run at 10,000 it takes minutes).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from soul.engines.dialogue import RunningMetrics, Turn, compute_metrics, keywords, metric_series
from soul.engines.dialogue.metrics import _circularity

VOCABULARY = ["freedom", "responsibility", "river", "banks", "flood", "choice", "weight", "justice", "virtue", "courage", "wisdom", "truth", "beauty", "language", "meaning", "memory", "reason", "knowledge", "society", "nature", "power", "fear", "hope", "desire", "question", "answer", "shadow", "light", "harbour", "tide", "compass", "promise", "silence", "argument"]
SHORT = ["the", "a", "of", "and", "is", "it", "so", "but", "not", "why", "how", "both"]


def transcript(turns: int, words: int, seed: int = 7) -> list[Turn]:
    """`turns` turns of about `words` words from a small vocabulary (so turns repeat each
    other, as a looping dialogue does); Fixy every 7th turn; a conflict value on most."""
    rng = random.Random(seed)
    out = []
    for i in range(turns):
        text = " ".join(rng.choice(VOCABULARY + SHORT) for _ in range(words))
        out.append(Turn("Fixy" if i % 7 == 6 else ("Socrates", "Athena")[i % 2], text + ("?" if i % 3 == 0 else "."),
                        is_fixy=i % 7 == 6, conflict=rng.uniform(0, 12) if i % 4 else None))
    return out


def best_ms(call: Callable[[], object], runs: int) -> tuple[float, float]:
    """(best, median) wall time of `call` in milliseconds over `runs` runs."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--words", type=int, default=40, help="words per turn (default 40)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    turns = transcript(args.turns + 1, args.words)
    body, last = turns[:-1], turns[-1]
    print(f"{args.turns:,} turns of {args.words} words; best and median of {args.runs} runs (ms)")

    def first_read() -> None:
        running = RunningMetrics()
        running.extend(body)
        running.metrics()

    rows: list[tuple[str, float, float]] = [("first read", *best_ms(first_read, args.runs))]
    words_only = best_ms(lambda: [keywords(t.text) for t in body], args.runs)
    rows.append(("  of which: the words of every turn", *words_only))

    grown = list(body)
    compute_metrics(grown)  # the runner read the dialogue up to here
    metric_series(grown)
    per_turn, series = [], []
    for _ in range(args.runs):
        grown.append(last)  # one more turn (the same object: the memo reads only it)
        started = time.perf_counter()
        compute_metrics(grown)
        per_turn.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        metric_series(grown)
        series.append((time.perf_counter() - started) * 1000)
    rows.append(("after one more turn", min(per_turn), statistics.median(per_turn)))
    rows.append(("series after one more turn", min(series), statistics.median(series)))

    for n in (400, 1_000, 2_000):
        sets = [keywords(t.text) for t in turns[:n]]
        rows.append((f"old all-pairs circularity, {n:,} turns", *best_ms(lambda s=sets: _circularity(s), 1)))

    width = max(len(name) for name, _, _ in rows)
    for name, best, median in rows:
        print(f"  {name:<{width}}  {best:9.2f}  {median:9.2f}")


if __name__ == "__main__":
    main()
