"""Words: whole-word marker matching, keyword sets and Jaccard similarity.

Every function here is one pass over its input (regex scans without nested quantifiers), so
a hostile 200 KB string costs linear time. Words are runs of letters/digits, lower-cased; an
apostrophe inside a word keeps it whole ("don't" is one word, so it never matches "no").
Markers are matched as whole words, never as substrings: "know" is not "no", "butter" is
not "but". A marker with a space ("in sum") matches those words in sequence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "CONFLICT_MARKERS",
    "DEPTH_MARKERS",
    "PROGRESS_MARKERS",
    "RESOLUTION_MARKERS",
    "SYNTHESIS_MARKERS",
    "count_marked",
    "has_marker",
    "jaccard",
    "keywords",
    "marker_hits",
    "markers_in",
    "words",
]

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

CONFLICT_MARKERS: frozenset[str] = frozenset({
    "no", "but", "disagree", "however", "wrong", "incorrect", "actually", "contrary",
    "opposite", "mistake", "error",
})
"""A turn carrying one of these words counts as conflictual (the high-conflict detector)."""

DEPTH_MARKERS: frozenset[str] = frozenset({
    "why", "because", "how", "reason", "therefore", "implies", "consequence", "deeper",
    "fundamental", "underlying", "depth", "foundation", "implication",
})
"""A turn carrying one of these words counts as deep (the shallow-discussion detector)."""

SYNTHESIS_MARKERS: frozenset[str] = frozenset({
    "connect", "integrate", "together", "both", "combine", "linking", "merging", "unified",
})
"""The synthesis-opportunity detector fires when none of the last 3 turns has one of these."""

PROGRESS_MARKERS: frozenset[str] = frozenset({
    "therefore", "integrating", "combining", "synthesis", "synthesize", "connect",
    "connecting", "both", "together", "unified", "merging", "bridge", "converge", "overall",
    "in sum", "to sum",
})
"""Synthesis markers of the progress-rate metric (a turn carrying one moves the talk on)."""

RESOLUTION_MARKERS: frozenset[str] = frozenset({
    "answer", "resolve", "resolved", "solution", "because", "explains", "explained",
    "clarifies", "hence", "thus", "so",
})
"""After a turn with a '?', a turn carrying one of these answers it (progress-rate metric)."""

KEYWORD_MIN_LENGTH = 5  # keywords are words longer than 4 characters


def words(text: str) -> list[str]:
    """The lower-cased words of `text`, in order."""
    return _WORD.findall(text.lower())


def keywords(text: str, min_length: int = KEYWORD_MIN_LENGTH) -> frozenset[str]:
    """The set of lower-cased words of `text` at least `min_length` (default 5, i.e. longer
    than 4) characters long — the "keyword set" every similarity in this engine compares."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) >= min_length)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B|; 0.0 when both sets are empty."""
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def marker_hits(text: str, markers: Iterable[str]) -> frozenset[str]:
    """The markers of `markers` that occur in `text` as whole words (phrases as consecutive
    words)."""
    return markers_in(words(text), markers)


def markers_in(tokens: list[str], markers: Iterable[str]) -> frozenset[str]:
    """`marker_hits` over a text's `words` already found (one regex pass serves several uses)."""
    present = set(tokens)
    found = set()
    phrases = []
    for marker in markers:
        parts = marker.lower().split()
        if len(parts) == 1:
            if parts[0] in present:
                found.add(marker)
        elif parts and all(part in present for part in parts):  # else it cannot occur
            phrases.append((marker, tuple(parts)))
    if phrases:
        # n-gram sets per phrase length: one pass over the tokens per distinct length
        for length in {len(p) for _, p in phrases}:
            grams = {tuple(tokens[i:i + length]) for i in range(len(tokens) - length + 1)}
            found.update(m for m, p in phrases if len(p) == length and p in grams)
    return frozenset(found)


def has_marker(text: str, markers: Iterable[str]) -> bool:
    """Whether `text` carries any of `markers` as a whole word (see `marker_hits`)."""
    return bool(marker_hits(text, markers))


def count_marked(texts: Iterable[str], markers: Iterable[str]) -> int:
    """How many of `texts` carry at least one of `markers`."""
    marks = tuple(markers)
    return sum(1 for text in texts if has_marker(text, marks))
