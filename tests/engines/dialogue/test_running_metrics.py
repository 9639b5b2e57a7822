"""Dialogue metrics in linear time (issue 24.7): `RunningMetrics` reads each turn once and equals
the per-metric formulas of metrics.py on any transcript, read whole or in pieces; the
windowed circularity rate equals the old all-pairs one up to 6 turns; `compute_metrics`
asked again about a grown transcript reads only its new turns; and a checkpoint carries a
reader to another process exactly, only onto the turns it was taken over."""

from __future__ import annotations

import json
import re
from itertools import pairwise

import pytest
from entelgia_transcripts import bag_of_words
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.engines.dialogue import (
    RunningMetrics,
    StateError,
    Turn,
    circularity_rate,
    circularity_series,
    compute_metrics,
    conflict_trend,
    fixy_per_50,
    intervention_utility,
    keywords,
    loop_rate,
    metric_series,
    novelty_ratio,
    novelty_series,
    progress_rate,
    topic_drift,
    topic_drift_series,
)
from soul.engines.dialogue.metrics import _circularity
from soul.engines.dialogue.running import transcript_digest

WORDS = ["alpha", "bravo", "charlie", "delta", "echoes", "so", "both", "in", "sum", "why", "answer", "the"]

turns_strategy = st.lists(
    st.builds(
        Turn,
        speaker=st.sampled_from(["Socrates", "Athena", "Fixy"]),
        text=st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join).flatmap(
            lambda t: st.sampled_from([t, t + "?", t.upper()])),
        is_fixy=st.booleans(),
        conflict=st.one_of(st.none(), st.floats(0, 20)),
        topic=st.one_of(st.none(), st.sampled_from(["alpha bravo", "delta"])),
    ),
    max_size=40,
)


def reference(turns: list[Turn], topic: str | None, embedder: object) -> dict[str, object]:
    """The metrics by the per-metric functions, each over the whole transcript."""
    conflicts = [t.conflict for t in turns if t.conflict is not None]
    return {
        "turns": len(turns), "fixy_turns": sum(t.is_fixy for t in turns),
        "circularity_rate": circularity_rate(turns), "progress_rate": progress_rate(turns),
        "intervention_utility": intervention_utility(turns), "loop_rate": loop_rate(turns),
        "fixy_per_50": fixy_per_50(turns), "topic_drift": topic_drift(turns, topic, embedder),  # type: ignore[arg-type]
        "novelty_ratio": novelty_ratio(turns), "conflict_trend": conflict_trend(turns),
        "conflict_mean": sum(conflicts) / len(conflicts) if conflicts else None,
    }


def close(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    return a == pytest.approx(b, rel=1e-9, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(turns=turns_strategy, cuts=st.lists(st.integers(0, 40), max_size=6), drift=st.booleans())
def test_running_metrics_equal_the_formulas_read_whole_or_in_pieces(turns: list[Turn], cuts: list[int], drift: bool) -> None:
    embedder = bag_of_words if drift else None
    running = RunningMetrics("alpha", embedder)
    bounds = [0, *sorted(c for c in cuts if c <= len(turns)), len(turns)]
    for a, b in pairwise(bounds):
        running.extend(turns[a:b])
    got = running.metrics().to_dict()
    want = reference(turns, "alpha", embedder)
    assert got.keys() == want.keys()
    assert all(close(got[k], want[k]) for k in want), (got, want)
    series = running.series()
    assert series.circularity == pytest.approx(circularity_series(turns))
    assert list(series.novelty) == novelty_series(turns)
    expected_drift = topic_drift_series(turns, "alpha", embedder)
    assert (series.topic_drift is None) == (expected_drift is None)
    if expected_drift is not None:
        assert all(close(x, y) for x, y in zip(series.topic_drift or (), expected_drift, strict=True))
    assert list(series.conflict) == [t.conflict for t in turns]
    assert list(series.fixy) == [t.is_fixy for t in turns]


@settings(max_examples=200, deadline=None)
@given(turns=turns_strategy.map(lambda ts: ts[:6]))
def test_the_windowed_circularity_rate_is_the_old_all_pairs_rate_up_to_six_turns(turns: list[Turn]) -> None:
    old = _circularity([keywords(t.text) for t in turns], window=None)
    assert circularity_rate(turns) == old
    assert compute_metrics(turns).circularity_rate == old


def test_the_circularity_rate_compares_turns_at_most_five_apart() -> None:
    same = Turn("A", "alpha bravo charlie")
    other = [Turn("B", f"zulu{i} yankee{i} xray{i}") for i in range(5)]
    # the repeat is 6 turns after the first: outside the window, so no circular pair
    assert circularity_rate([same, *other, same]) == 0.0
    assert circularity_rate([same, *other[:4], same]) == pytest.approx(1 / 15)


class CountingEmbedder:
    """bag_of_words, counting the texts it embeds."""

    def __init__(self) -> None:
        self.texts = 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return bag_of_words(texts)


def test_asked_again_about_a_grown_transcript_only_the_new_turns_are_read() -> None:
    embed = CountingEmbedder()
    turns: list[Turn] = []
    for i in range(50):
        turns.append(Turn("Socrates" if i % 2 else "Athena", f"alpha{i} bravo charlie{i % 7}", conflict=float(i % 5)))
        before = embed.texts
        got = compute_metrics(list(turns), "alpha bravo", embed)
        metric_series(list(turns), "alpha bravo", embed)  # the same reading serves the series
        assert embed.texts - before == (2 if i == 0 else 1)  # the topic once, then each new text once
        assert got.turns == i + 1
    fresh = RunningMetrics("alpha bravo", bag_of_words)
    fresh.extend(turns)
    assert got == fresh.metrics()


def test_a_transcript_with_a_turn_replaced_is_read_anew() -> None:
    turns = [Turn("A", f"alpha{i} bravo") for i in range(10)]
    compute_metrics(turns)
    changed = [*turns[:5], Turn("A", "alpha0 bravo"), *turns[6:]]  # an equal-looking but new object at 5
    want = RunningMetrics()
    want.extend(changed)
    assert compute_metrics(changed) == want.metrics()
    assert compute_metrics(turns) == compute_metrics(list(turns))


# -- checkpoints: a saved dialogue's metrics restored, not read again --------------------------


def stored(turns: list[Turn]) -> list[Turn]:
    """The turns as a resumed dialogue has them: new objects, from their JSON."""
    return [Turn.from_dict(json.loads(json.dumps(t.to_dict()))) for t in turns]


@settings(max_examples=300, deadline=None)
@given(turns=turns_strategy, cut=st.integers(0, 40), drift=st.booleans())
def test_a_checkpoint_restored_in_another_process_gives_the_metrics_of_a_whole_read(turns: list[Turn], cut: int, drift: bool) -> None:
    embedder = bag_of_words if drift else None
    cut = min(cut, len(turns))
    before = RunningMetrics("alpha", embedder)
    before.extend(turns[:cut])
    saved = json.loads(json.dumps(before.checkpoint()))  # what the state file holds
    # restored over the stored transcript, which may have grown since (the turns after are read)
    kept = json.dumps(saved)
    restored = RunningMetrics.from_checkpoint(saved, stored(turns), "alpha", embedder)
    whole = RunningMetrics("alpha", embedder)
    whole.extend(turns)
    assert restored.metrics() == whole.metrics()  # equal, not close: the sums are carried exactly
    assert restored.series() == whole.series()
    more = [Turn("Athena", "alpha bravo charlie?", conflict=3.0), Turn("Fixy", "echoes delta", is_fixy=True),
            *(Turn("Socrates", f"answer delta {w}") for w in WORDS[:6])]
    restored.extend(more)
    whole.extend(more)
    assert restored.metrics() == whole.metrics()
    assert restored.series() == whole.series()
    assert json.dumps(saved) == kept  # the checkpoint given is left as it was
    again, fresh = restored.checkpoint(), whole.checkpoint()
    assert set(again.pop("vocabulary").split("\n")) == set(fresh.pop("vocabulary").split("\n"))
    assert again == fresh


def test_a_checkpoint_restores_without_reading_the_turns_it_covers() -> None:
    turns = [Turn("A" if i % 2 else "B", f"alpha{i} bravo charlie{i % 7}", conflict=float(i % 5)) for i in range(40)]
    embed = CountingEmbedder()
    first = RunningMetrics("alpha bravo", embed)
    first.extend(turns[:30])
    saved = json.loads(json.dumps(first.checkpoint()))
    later = CountingEmbedder()
    restored = RunningMetrics.from_checkpoint(saved, stored(turns), "alpha bravo", later)
    assert later.texts == 1 + 10  # the topic, then the 10 turns after the checkpoint: none of the 30 before
    assert restored.count == 40


def test_a_checkpoint_that_does_not_fit_the_transcript_is_refused_saying_why() -> None:
    turns = [Turn("A", f"alpha{i} bravo charlie", conflict=1.0) for i in range(12)]
    run = RunningMetrics("alpha")
    run.extend(turns)
    saved = json.loads(json.dumps(run.checkpoint()))
    edited = [*turns[:4], Turn("A", "alpha4 bravo [redacted]", conflict=1.0), *turns[5:]]
    cases = [
        (saved, edited, "alpha", None, "other turns than the first 12"),
        (saved, turns[:11], "alpha", None, "it read 12 turns; the transcript has 11"),
        (saved, turns, "bravo", None, "another topic or embedder"),
        (saved, turns, "alpha", bag_of_words, "another topic or embedder"),
        ({**saved, "version": 99}, turns, "alpha", None, "not one of version 1"),
        ({**saved, "novelty": saved["novelty"][:-1]}, turns, "alpha", None, "`novelty` is not 12 values"),
        ({**saved, "circularity": ["x"] * 12}, turns, "alpha", None, "`circularity` is not 12 values"),
        ({**saved, "counted": [1, 2]}, turns, "alpha", None, "pair bits"),
        ({**saved, "pairs": [1]}, turns, "alpha", None, "malformed"),
        ({k: v for k, v in saved.items() if k != "loops"}, turns, "alpha", None, "malformed"),
        ({**saved, "vocabulary": ["alpha"]}, turns, "alpha", None, "`vocabulary` is not a string"),
        ("not a mapping", turns, "alpha", None, "not one of version 1"),
    ]
    for data, transcript, topic, embedder, why in cases:
        with pytest.raises(StateError, match=re.escape(why)):
            RunningMetrics.from_checkpoint(data, transcript, topic, embedder)  # type: ignore[arg-type]


def test_the_transcript_digest_tells_apart_what_the_metrics_read() -> None:
    base = [Turn("A", "ab", topic="t", conflict=1.0), Turn("B", "c")]
    variants = [
        [Turn("A", "a", topic="t", conflict=1.0), Turn("B", "bc")],  # the same text joined, cut elsewhere
        [Turn("A", "ab", topic="t", conflict=2.0), Turn("B", "c")],
        [Turn("A", "ab", topic="t"), Turn("B", "c")],
        [Turn("A", "ab", topic=None, conflict=1.0), Turn("B", "c")],
        [Turn("A", "ab", topic="t", conflict=1.0, is_fixy=True), Turn("B", "c")],
        base[:1],
    ]
    digests = {transcript_digest(v) for v in variants}
    assert len(digests) == len(variants) and transcript_digest(base) not in digests
    assert transcript_digest([Turn("A", "lone \ud800 surrogate")])  # as JSON may give it: no error


def test_a_checkpoint_of_a_hostile_transcript_is_linear_and_exact() -> None:
    huge = "x" * 1_000_000  # one 1 MB word, and many short turns
    turns = [Turn("A", f"{huge} alpha"), *(Turn("B", f"bravo{i % 50} charlie") for i in range(3000))]
    run = RunningMetrics()
    run.extend(turns)
    saved = json.loads(json.dumps(run.checkpoint()))
    assert huge in saved["vocabulary"].split("\n")
    restored = RunningMetrics.from_checkpoint(saved, stored(turns))
    assert restored.metrics() == run.metrics() and restored.series() == run.series()
