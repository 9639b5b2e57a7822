"""The metrics (engines/dialogue/metrics.py) on a hand-computed transcript.

Keyword sets (words longer than 4 letters):
    t0 Socrates  "alpha bravo charlie"         K0 = {alpha, bravo, charlie}
    t1 Athena    "alpha bravo delta?"          K1 = {alpha, bravo, delta}
    t2 Socrates  "So alpha bravo charlie"      K2 = K0   ("so" answers t1's question)
    t3 Fixy      "Pause: think again."         K3 = {pause, think, again}
    t4 Athena    "echoes foxtrot"              K4 = {echoes, foxtrot}
    t5 Socrates  "so it goes"                  K5 = {}
Jaccard: J01 = 2/4 = 0.5, J02 = 1, J12 = 0.5, every other pair 0; all 15 pairs count (only
K5 is empty).
"""

from __future__ import annotations

import pytest
from entelgia_transcripts import bag_of_words

from soul.engines.dialogue import (
    Turn,
    circularity_rate,
    circularity_series,
    compute_metrics,
    conflict_trend,
    fixy_per_50,
    intervention_utility,
    loop_rate,
    metric_series,
    novelty_ratio,
    novelty_series,
    progress_rate,
    topic_drift,
)

T = [
    Turn("Socrates", "alpha bravo charlie", conflict=2.0),
    Turn("Athena", "alpha bravo delta?", conflict=4.0),
    Turn("Socrates", "So alpha bravo charlie"),
    Turn("Fixy", "Pause: think again.", is_fixy=True),
    Turn("Athena", "echoes foxtrot", conflict=8.0),
    Turn("Socrates", "so it goes"),
]


def test_circularity_rate_over_all_pairs():
    assert circularity_rate(T) == pytest.approx(3 / 15)


def test_circularity_per_turn_over_the_six_turns_ending_there():
    assert circularity_series(T) == pytest.approx([0.0, 1.0, 1.0, 3 / 6, 3 / 10, 3 / 15])


def test_progress_rate_counts_moves_on_synthesis_and_answers():
    # t1: J=0.5, no marker → no; t2: answers t1's "?" with "so" → yes; t3, t4, t5: J=0 → yes
    assert progress_rate(T) == pytest.approx(4 / 5)
    assert progress_rate([Turn("A", "alpha bravo"), Turn("B", "alpha bravo, both")]) == 1.0  # synthesis marker
    assert progress_rate(T[:1]) == 0.0


def test_intervention_utility_is_circularity_before_minus_after():
    # before Fixy: t0..t2 → 3/3 = 1.0; after: t4, t5 → 0/1 = 0.0
    assert intervention_utility(T) == pytest.approx(1.0)
    assert intervention_utility([t for t in T if not t.is_fixy]) is None


def test_loop_rate_per_100_turns():
    # loop turns: t1 (J with t0 = 0.5) and t2 (J with t0 = 1) → 100 · 2 / 6
    assert loop_rate(T) == pytest.approx(100 * 2 / 6)


def test_fixy_interventions_per_50_turns():
    assert fixy_per_50(T) == pytest.approx(50 / 6)
    assert fixy_per_50([]) == 0.0


def test_novelty_counts_new_concepts_per_ten_turns():
    assert novelty_series(T) == [3, 1, 0, 3, 2, 0]
    assert novelty_ratio(T) == pytest.approx(10 * 9 / 6)


def test_conflict_trend_is_the_least_squares_slope():
    # points (0, 2), (1, 4), (4, 8): slope = (114/9) / (78/9)
    assert conflict_trend(T) == pytest.approx(114 / 78)
    assert conflict_trend(T[2:4]) is None


def test_topic_drift_needs_an_embedder():
    turns = [Turn("A", "alpha bravo"), Turn("Fixy", "whatever", is_fixy=True), Turn("B", "zulu yankee")]
    assert topic_drift(turns, "alpha bravo", None) is None
    assert topic_drift(turns, "alpha bravo", bag_of_words) == pytest.approx(0.5)  # (0 + 1) / 2, Fixy skipped


def test_compute_metrics_gathers_every_signal_and_the_series_for_plots():
    m = compute_metrics(T)
    assert m.to_dict() == pytest.approx({
        "turns": 6, "fixy_turns": 1, "circularity_rate": 0.2, "progress_rate": 0.8, "intervention_utility": 1.0,
        "loop_rate": 100 * 2 / 6, "fixy_per_50": 50 / 6, "topic_drift": None, "novelty_ratio": 15.0,
        "conflict_trend": 114 / 78, "conflict_mean": 14 / 3,
    })
    series = metric_series(T).to_dict()
    assert series["fixy"] == [False, False, False, True, False, False]
    assert series["conflict"] == [2.0, 4.0, None, None, 8.0, None]
    assert series["topic_drift"] is None and len(series["circularity"]) == 6
