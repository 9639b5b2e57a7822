"""A section that repeats the prompt's instructions instead of answering them.

Small models fill a section with the words that asked for it ("As the subconscious of Csd:
name the mood you are in now…", "(optional)", "## Response Format"): it parses, and says
nothing. `Instructions` holds what a call's instructions (its persona and response format)
are made of: every run of ECHO_WORDS consecutive words, and their parenthesised notes
("(optional)", "(true or false)"). A section echoes them when it holds such a run or note, or
is nothing but a parenthesised placeholder ("(empty)", "(none)"). Headings are not marks: a
user model is markdown whose headings ("## Persona") the instructions ask for. The runtime
treats an echoing section as a bad one: it re-asks, and what still echoes is dropped
(`runtime/turn/calls.py`). Linear in the text: one pass over its words, each run looked up
in a set, and a few substring searches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

ECHO_WORDS = 6  # this many consecutive words of the instructions in a section: it parrots them
MARK_CHARS = 60  # a parenthesised note of the instructions is at most this long
_WORD = re.compile(r"[a-z0-9']+")
_NOTE = re.compile(rf"\([^()\n]{{1,{MARK_CHARS}}}\)")
_PLACEHOLDER = re.compile(rf"\A\s*\([^()\n]{{0,{MARK_CHARS}}}\)\s*\Z")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Instructions:
    """What a call's instructions are made of (build with `instructions_of`)."""

    runs: frozenset[tuple[str, ...]]
    marks: tuple[str, ...]  # lower-cased parenthesised notes, longest first
    openings: frozenset[tuple[str, ...]] = frozenset({()})  # the runs' first 0..ECHO_WORDS-1 words

    def may_echo(self, text: str) -> bool:
        """Whether `text`, the opening of a section still being written, may yet turn out to
        echo the instructions from its start: its whole words so far begin one of their runs,
        or it opens a parenthesised note not closed yet. A stream holds it while so."""
        stripped = text.lstrip()
        if stripped.startswith("(") and ")" not in stripped and len(stripped) <= MARK_CHARS:
            return True
        said = words(text)
        if said and (text[-1:].isalnum() or text[-1:] == "'"):
            said = said[:-1]  # the last word may not be whole yet
        return len(said) < ECHO_WORDS and tuple(said) in self.openings

    def echoed(self, text: str) -> str | None:
        """What of the instructions `text` repeats (a run of words, joined; a mark; the
        placeholder it is), or None when it says something of its own."""
        if _PLACEHOLDER.match(text):
            return text.strip()
        lowered = text.lower()
        for mark in self.marks:
            if mark in lowered:
                return mark
        said = words(text)
        for i in range(len(said) - ECHO_WORDS + 1):
            run = tuple(said[i:i + ECHO_WORDS])
            if run in self.runs:
                return " ".join(run)
        return None


@lru_cache(maxsize=256)
def instructions_of(*texts: str) -> Instructions:
    """The instructions made of `texts` (cached: a call's persona and response format are the
    same call after call)."""
    runs: set[tuple[str, ...]] = set()
    marks: set[str] = set()
    for text in texts:
        w = words(text)
        runs.update(tuple(w[i:i + ECHO_WORDS]) for i in range(len(w) - ECHO_WORDS + 1))
        marks.update(m.lower() for m in _NOTE.findall(text))
    openings = {run[:n] for run in runs for n in range(ECHO_WORDS)}
    return Instructions(frozenset(runs), tuple(sorted(marks, key=lambda m: (-len(m), m))), frozenset(openings | {()}))
