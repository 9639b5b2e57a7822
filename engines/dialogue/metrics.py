"""Evaluation signals over a transcript — each a pure function of the turns, linear in them
(every signal compares a turn with at most the 5 before it); `compute_metrics` and
`metric_series` (`running.py`) gather them incrementally.

Notation: the transcript is turns 0..n−1, Fixy's turns included (a turn is Fixy's when
`is_fixy`); K_i is the keyword set of turn i (lower-cased words longer than 4 characters,
`words.keywords`); J is Jaccard similarity (0 when both sets are empty). A pair of turns
"counts" only when at least one of its two keyword sets is non-empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from .turns import as_turns
from .vectors import Embedder, cosine, embed
from .words import PROGRESS_MARKERS, RESOLUTION_MARKERS, has_marker, jaccard, keywords

__all__ = [
    "DialogueMetrics",
    "MetricSeries",
    "circularity_rate",
    "circularity_series",
    "conflict_trend",
    "fixy_per_50",
    "intervention_utility",
    "loop_rate",
    "novelty_ratio",
    "novelty_series",
    "progress_rate",
    "topic_drift",
    "topic_drift_series",
]

CIRCULAR = 0.5  # J >= this: a circular pair
MOVED_ON = 0.4  # J < this with the previous turn: the turn moves on
WINDOW = 6  # circularity compares each turn with the 5 before it


def _circularity(sets: Sequence[frozenset[str]], threshold: float = CIRCULAR, window: int | None = None) -> float:
    """The fraction of counting pairs i < j (at most `window` − 1 apart; any, when None) that
    are circular."""
    counted = circular = 0
    reach = len(sets) if window is None else window - 1
    for j in range(len(sets)):
        for i in range(max(0, j - reach), j):
            if sets[i] or sets[j]:
                counted += 1
                circular += jaccard(sets[i], sets[j]) >= threshold
    return circular / counted if counted else 0.0


def circularity_rate(turns: Sequence[Any], threshold: float = CIRCULAR, window: int = WINDOW) -> float:
    """Over the unordered pairs (i, j), i < j <= i + 5, that count (each turn with the 5 before
    it: the pairs of every window of 6 turns): the fraction with J(K_i, K_j) >= 0.5. 0.0 when no
    pair counts. (Until issue 24 it was over all pairs of the transcript: quadratic in its
    length; for 6 turns or fewer the two are the same.)"""
    return _circularity([keywords(t.text) for t in as_turns(turns)], threshold, window)


def circularity_series(turns: Sequence[Any], window: int = 6, threshold: float = CIRCULAR) -> list[float]:
    """For each turn t: the circularity rate of the window of turns max(0, t−5)..t (the 6
    turns ending at t, inclusive)."""
    sets = [keywords(t.text) for t in as_turns(turns)]
    return [_circularity(sets[max(0, t + 1 - window):t + 1], threshold) for t in range(len(sets))]


def progress_rate(turns: Sequence[Any]) -> float:
    """The share of turns 1..n−1 that move on, over n − 1 (0.0 when n < 2). Turn i moves on
    when (a) J(K_{i−1}, K_i) < 0.4 and the pair counts, or (b) it carries a synthesis marker
    (`PROGRESS_MARKERS`, whole words), or (c) turn i−1 contains "?" and turn i carries a
    resolution marker (`RESOLUTION_MARKERS`)."""
    ts = as_turns(turns)
    if len(ts) < 2:
        return 0.0
    sets = [keywords(t.text) for t in ts]
    moved = 0
    for i in range(1, len(ts)):
        if ((sets[i - 1] or sets[i]) and jaccard(sets[i - 1], sets[i]) < MOVED_ON) or has_marker(ts[i].text, PROGRESS_MARKERS) or ("?" in ts[i - 1].text and has_marker(ts[i].text, RESOLUTION_MARKERS)):
            moved += 1
    return moved / (len(ts) - 1)


def intervention_utility(turns: Sequence[Any], window: int = 5, threshold: float = CIRCULAR) -> float | None:
    """For each Fixy turn k with at least one turn before and one after: circularity rate of
    turns max(0, k−5)..k−1 minus that of turns k+1..min(n−1, k+5) (both windows may hold
    other Fixy turns). The mean over those Fixy turns; positive means less circularity after
    Fixy spoke. None when no Fixy turn has turns on both sides."""
    ts = as_turns(turns)
    sets = [keywords(t.text) for t in ts]
    gains = [
        _circularity(sets[max(0, k - window):k], threshold) - _circularity(sets[k + 1:k + 1 + window], threshold)
        for k, t in enumerate(ts) if t.is_fixy and 0 < k < len(ts) - 1
    ]
    return sum(gains) / len(gains) if gains else None


def loop_rate(turns: Sequence[Any], window: int = 6, threshold: float = CIRCULAR) -> float:
    """Loop turns per 100 turns: 100 · L / n (0.0 when n = 0), where turn i is a loop turn
    when J(K_i, K_j) >= 0.5 for some earlier j in i−5..i−1 (the window of 6 ending at i)
    whose pair counts."""
    sets = [keywords(t.text) for t in as_turns(turns)]
    if not sets:
        return 0.0
    loops = sum(
        1 for i in range(1, len(sets))
        if any((sets[i] or sets[j]) and jaccard(sets[i], sets[j]) >= threshold for j in range(max(0, i - window + 1), i))
    )
    return 100.0 * loops / len(sets)


def fixy_per_50(turns: Sequence[Any]) -> float:
    """Fixy's turns per 50 turns: 50 · F / n (0.0 when n = 0)."""
    ts = as_turns(turns)
    return 50.0 * sum(t.is_fixy for t in ts) / len(ts) if ts else 0.0


def novelty_series(turns: Sequence[Any]) -> list[int]:
    """For each turn i: |K_i − (K_0 ∪ … ∪ K_{i−1})|, the concepts it introduces."""
    seen: set[str] = set()
    series = []
    for t in as_turns(turns):
        kw = keywords(t.text)
        series.append(len(kw - seen))
        seen |= kw
    return series


def novelty_ratio(turns: Sequence[Any], per: int = 10) -> float:
    """New concepts per `per` (10) turns: per · Σ_i novelty_i / n (0.0 when n = 0); turn 0's
    keywords all count as new."""
    series = novelty_series(turns)
    return per * sum(series) / len(series) if series else 0.0


def topic_drift_series(turns: Sequence[Any], topic: str | None, embedder: Embedder | None) -> list[float | None] | None:
    """For each non-Fixy turn: 1 − cosine(embedding of its topic — the turn's own `topic`,
    else `topic` — , embedding of its text); None for Fixy turns and turns without a topic.
    None (the whole series) without an embedder."""
    if embedder is None:
        return None
    ts = as_turns(turns)
    wanted = [(i, t.topic or topic) for i, t in enumerate(ts) if not t.is_fixy and (t.topic or topic)]
    if not wanted:
        return [None] * len(ts)
    topics = sorted({str(tp) for _, tp in wanted})
    vectors = embed(embedder, topics + [ts[i].text for i, _ in wanted])
    topic_vec = dict(zip(topics, vectors[:len(topics)], strict=True))
    series: list[float | None] = [None] * len(ts)
    for (i, tp), vec in zip(wanted, vectors[len(topics):], strict=True):
        series[i] = 1.0 - cosine(topic_vec[str(tp)], vec)
    return series


def topic_drift(turns: Sequence[Any], topic: str | None, embedder: Embedder | None) -> float | None:
    """The mean of `topic_drift_series` over the turns that have a value; None without an
    embedder or when no turn has a topic."""
    series = topic_drift_series(turns, topic, embedder)
    values = [v for v in series or () if v is not None]
    return sum(values) / len(values) if values else None


def conflict_trend(turns: Sequence[Any]) -> float | None:
    """The least-squares slope of the turns' `conflict` values against their position i
    (turns without a value are skipped): Σ(i − ī)(c − c̄) / Σ(i − ī)²; None with fewer than 2
    values. Positive: conflict is rising."""
    points = [(i, float(t.conflict)) for i, t in enumerate(as_turns(turns)) if t.conflict is not None]
    if len(points) < 2:
        return None
    mi = sum(i for i, _ in points) / len(points)
    mc = sum(c for _, c in points) / len(points)
    den = sum((i - mi) ** 2 for i, _ in points)
    return sum((i - mi) * (c - mc) for i, c in points) / den if den else None


@dataclass(frozen=True)
class MetricSeries:
    """Per-turn series for plotting: circularity (window 6), novelty (new concepts), topic
    drift (None without an embedder), conflict (None where a turn has none), Fixy turns."""

    circularity: tuple[float, ...]
    novelty: tuple[int, ...]
    topic_drift: tuple[float | None, ...] | None
    conflict: tuple[float | None, ...]
    fixy: tuple[bool, ...]

    def to_dict(self) -> dict[str, Any]:
        # not `asdict`: it deep-copies every value of every series, 20 ms at 10,000 turns
        return {f.name: (list(v) if (v := getattr(self, f.name)) is not None else None) for f in fields(self)}


@dataclass(frozen=True)
class DialogueMetrics:
    """Every signal of one transcript (see each function for its formula)."""

    turns: int
    fixy_turns: int
    circularity_rate: float
    progress_rate: float
    intervention_utility: float | None
    loop_rate: float
    fixy_per_50: float
    topic_drift: float | None
    novelty_ratio: float
    conflict_trend: float | None
    conflict_mean: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
