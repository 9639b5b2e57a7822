"""Dialogue metrics at length: what the metrics of a 10,000-turn dialogue cost, read whole and
as the runner and `soul serve` read them (incrementally, after each turn), beside the old
all-pairs circularity that made them quadratic.

Run: python benchmarks/dialogue_metrics.py [--turns 10000] [--words 40] [--runs 3] [--cold 1000 10000]
Goal (issue 24.7): a 10,000-turn dialogue's metrics in well under 100 ms, linear in the turns,
including the first (cold) read of a stored one.

Rows:
- `first read`: `RunningMetrics` over the whole transcript (one pass: every turn's words read
  once), as a resumed dialogue's first request did before checkpoints (see the cold rows);
- `after one more turn`: `compute_metrics` on the transcript grown by one turn (what the
  runner asks after every turn, and the server's GET after it): the new turn's work plus
  the check that the first turns are the ones already read;
- `series after one more turn`: `metric_series` likewise;
- `old all-pairs circularity`: the whole-transcript pair loop the metrics used before, at a
  few lengths (it grows with the square of the turns; run at 10,000 it takes minutes).

Cold rows, for each `--cold` length — a stored dialogue's metrics (and series) read for the
first time by a new process, from the turns as the saved state gives them:
- `cold, no checkpoint`: every turn's words read (a dialogue saved before checkpoints; what
  every cold read did before them);
- `cold, checkpoint`: the saved checkpoint parsed (its share of the file's JSON), checked
  against the turns (their digest) and restored;
- `resume + first metrics`: the whole of what `soul dialogue --resume` and a server's first
  `GET /api/dialogues/{id}` do before the result: `DialogueRunner.open(resume=)` on a saved
  entelgia dialogue (its file parsed, its turns and events rebuilt), then the metrics and
  series, without and with the checkpoint in the file (`open` and `metrics` apart).
On a checkout without checkpoints (`RunningMetrics.from_checkpoint` missing) the checkpoint
rows are skipped, so the same script measures the code before them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable

from soul.engines.dialogue import RunningMetrics, Turn, compute_metrics, keywords, metric_series
from soul.engines.dialogue.metrics import _circularity

CHECKPOINTS = hasattr(RunningMetrics, "from_checkpoint")

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


def stored_turns(turns: list[Turn]) -> list[Turn]:
    """The turns as a resumed dialogue has them: new objects, from their saved JSON."""
    return [Turn.from_dict(raw) for raw in json.loads(json.dumps([t.to_dict() for t in turns]))]


def cold_rows(n: int, words: int, runs: int) -> list[tuple[str, float, float]]:
    """The engine's cold read of an n-turn transcript, without and with its checkpoint."""
    turns = stored_turns(transcript(n, words))

    def whole() -> None:
        running = RunningMetrics()
        running.extend(turns)
        running.metrics(), running.series().to_dict()

    rows = [(f"cold, no checkpoint, {n:,} turns", *best_ms(whole, runs))]
    if CHECKPOINTS:
        taken = RunningMetrics()
        taken.extend(turns)
        saved = json.dumps(taken.checkpoint())

        def restored() -> None:
            running = RunningMetrics.from_checkpoint(json.loads(saved), turns)
            running.metrics(), running.series().to_dict()

        rows.append((f"cold, checkpoint, {n:,} turns ({len(saved) / 1e3:.0f} kB of JSON)", *best_ms(restored, runs)))
    return rows


def resume_rows(n: int, words: int, runs: int) -> list[tuple[str, float, float]]:
    """`DialogueRunner.open(resume=)` and the first metrics of a saved n-turn entelgia
    dialogue, the file without and (when the code has them) with its checkpoint."""
    with tempfile.TemporaryDirectory() as home:
        os.environ["SOUL_HOME"] = home
        from soul.providers import ScriptedProvider
        from soul.runtime import DialogueRunner, DialogueTurn

        def scripted() -> dict[str, ScriptedProvider]:
            return {a: ScriptedProvider(["Freedom is a river, and responsibility its banks."] * 4, a)
                    for a in ("socrates", "athena", "fixy")}

        runner = DialogueRunner.open("entelgia", provider=scripted(), home=home, embedder=None)
        runner.run_sync(2)
        said = [Turn(t.speaker.lower(), t.text, t.is_fixy, conflict=t.conflict, topic=runner.rules.topic(1))
                for t in transcript(n, words)]
        runner.rules.state.turns = said
        runner.events = [DialogueTurn(i + 1, t.speaker, t.text, t.topic or "", None, 80.0, t.is_fixy, conflict=t.conflict)
                         for i, t in enumerate(said)]
        path = runner.save()
        with_checkpoint = path.read_text(encoding="utf-8")
        data = json.loads(with_checkpoint)
        data.pop("metrics_checkpoint", None)
        files = {"no checkpoint": json.dumps(data, ensure_ascii=False)}
        if CHECKPOINTS:
            files["checkpoint"] = with_checkpoint
        rows = []
        for name, text in files.items():
            opened, read = [], []
            for _ in range(runs):
                path.write_text(text, encoding="utf-8")
                started = time.perf_counter()
                resumed = DialogueRunner.open("entelgia", provider=scripted(), home=home, embedder=None, resume=runner.id)
                middle = time.perf_counter()
                resumed.rules.metrics(), resumed.rules.series()
                opened.append((middle - started) * 1000)
                read.append((time.perf_counter() - middle) * 1000)
                resumed.close()
            rows.append((f"resume + first metrics, {name}, {n:,} turns: open", min(opened), statistics.median(opened)))
            rows.append((f"resume + first metrics, {name}, {n:,} turns: metrics", min(read), statistics.median(read)))
        runner.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--words", type=int, default=40, help="words per turn (default 40)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", type=int, nargs="*", default=[1_000, 10_000],
                        help="transcript lengths of the cold rows (default 1000 10000; none: skip them)")
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
    for n in args.cold:
        rows += cold_rows(n, args.words, args.runs)
    for n in args.cold:
        rows += resume_rows(n, args.words, args.runs)

    width = max(len(name) for name, _, _ in rows)
    for name, best, median in rows:
        print(f"  {name:<{width}}  {best:9.2f}  {median:9.2f}")


if __name__ == "__main__":
    main()
