"""Whole-word markers, keyword sets and Jaccard (engines/dialogue/words.py)."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soul.engines.dialogue import (
    CONFLICT_MARKERS,
    PROGRESS_MARKERS,
    has_marker,
    jaccard,
    keywords,
    marker_hits,
    trim_intervention,
    words,
)


def test_markers_match_whole_words_not_substrings():
    assert not has_marker("I know it well", {"no"})
    assert has_marker("No, I disagree.", {"no"})
    assert not has_marker("pass the butter", {"but"})
    assert has_marker("fine, but why?", {"but"})
    assert not has_marker("nobody makes errors", CONFLICT_MARKERS)
    assert not has_marker("I don't think so", {"no", "don"})  # the apostrophe keeps "don't" whole


def test_marker_phrases_match_consecutive_words():
    assert "in sum" in marker_hits("So, in sum: both hold.", PROGRESS_MARKERS)
    assert "in sum" not in marker_hits("in the sum of things", PROGRESS_MARKERS)


def test_words_are_lower_cased_and_keywords_longer_than_four():
    assert words("Why, WHY? Soul_graph") == ["why", "why", "soul", "graph"]
    assert keywords("Truth is about being honest always") == frozenset({"truth", "about", "being", "honest", "always"})
    assert "four" not in keywords("four fives")


def test_jaccard_of_sets_and_of_two_empty_sets():
    assert jaccard({"a", "b"}, {"b", "c"}) == 1 / 3
    assert jaccard(set(), set()) == 0.0


HOSTILE = st.sampled_from(["'", "a'", "no ", "but", "?", ".", " ", "é", "_", "in sum ", "x" * 7])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=HOSTILE, extra=st.text(max_size=40))
def test_hostile_200kb_strings_take_linear_time(unit, extra):
    text = (unit * (200_000 // len(unit)) + extra)[:200_000]
    start = time.perf_counter()
    words(text)
    keywords(text)
    marker_hits(text, PROGRESS_MARKERS | CONFLICT_MARKERS)
    trim_intervention(text)
    assert time.perf_counter() - start < 5.0  # a quadratic scan of 200 KB takes minutes


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=HOSTILE)
def test_detectors_metrics_and_context_stay_linear_on_200kb_turns(unit):
    from soul.engines.dialogue import ContextRequest, Turn, build_context, compute_metrics, scan

    big = (unit * (200_000 // len(unit)))[:200_000]
    turns = [Turn("Socrates" if i % 2 else "Athena", big) for i in range(6)]
    start = time.perf_counter()
    scan(turns, 30, topic=big, personas={"Socrates": big, "Athena": big})
    compute_metrics(turns)
    prompt = build_context(ContextRequest(name="A", persona=big, seed=big, history=tuple(turns)))
    assert len(prompt) <= 6000 and prompt.endswith("Respond now:")
    assert time.perf_counter() - start < 20.0
