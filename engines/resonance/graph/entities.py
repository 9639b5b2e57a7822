"""Entity extraction without an LLM: names, code identifiers and frequent noun phrases.

`extract_entities(text)` finds, in order of first appearance and without duplicates:

- **code identifiers**: ``dotted.paths``, calls ``foo()`` (kept as ``foo``), ``snake_case``,
  ``SCREAMING_CASE``, ``CamelCase`` and ``lowerCamel``;
- **capitalised names**: runs of capitalised words ("Caroline Smith", "New York", "NASA"),
  with possessives stripped ("Caroline's" → "Caroline"); a capitalised word that is a
  stop word or a common sentence opener ("The", "Yesterday", "Thanks", "I"), or a weekday or
  month, is never a name, so a sentence-initial "The cat" gives nothing and "The Beatles"
  gives "Beatles";
- **noun phrases**, when a `PhraseCounter` is given: runs of 2–3 content words ("pottery
  class", "adoption agency") that the counter has seen in at least ``min_count`` memories.
  Without part-of-speech tagging a single text's word pairs are mostly noise; recurring
  across memories is what makes a phrase a topic worth a node.

Entities are returned in a display form (as written, whitespace collapsed); `normalise`
gives the key the graph matches them by (case-folded), so "Caroline" and "caroline" are one
node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..recall.text import ENGLISH_STOP_WORDS, clip_long_words

__all__ = ["PhraseCounter", "extract_entities", "normalise", "noun_phrases"]

# Capitalised words that start sentences or greet, not names (the stop words are added).
_COMMON = frozenset("""
    also although anyway actually after again ah alright always another anything apparently
    because before besides but by congrats congratulations could dear definitely do does
    either else even eventually every everyone everything finally first for glad good great
    guess haha happy hello hey hi honestly hope how however i'd i'll i'm i've if im in indeed
    instead it's just last later let let's like lol maybe meanwhile might more most much my
    next nice no nobody nope not nothing now oh ok okay once one only or other our perhaps
    please plus probably quite rather really right same see since so some someone something
    sometimes sorry still such sure thank thanks that's then there there's therefore these
    they they're this those though thus today tomorrow tonight totally true truly um unless
    until us very was we we're well what what's whatever when where whether which while who
    why will with without wow would yeah yes yesterday yet you you're yours
    add ask call check find get give go keep look make note open put read remember run set
    show start stop take tell try use write
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december
""".split())  # noqa: SIM905 - readable as prose
_NOT_NAME = ENGLISH_STOP_WORDS | _COMMON

_CAP_WORD = r"(?:[A-Z][a-z]+(?:['’][a-z]+)?|[A-Z]{2,}[a-z]?)"
# "Museum of Modern Art", "Leonardo da Vinci": a lowercase connector between capitals.
_CONNECT = r"(?:of|de|del|da|di|van|von|der|du|la|le)"
_NAME = re.compile(rf"\b{_CAP_WORD}(?:[ \t]+(?:{_CONNECT}[ \t]+)?{_CAP_WORD})*")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
_SNAKE = re.compile(r"\b[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+)\b")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]*|[^\sA-Za-z]")
_SENTENCE_END = frozenset(".!?")
_POSSESSIVE = re.compile(r"['’]s$")
# Words that fill noun-phrase slots in conversation without naming a topic.
_PHRASE_STOP = _NOT_NAME | frozenset("""
    lot lots thing things stuff time times way day days week weeks year years kind sort bit
    really pretty totally super awesome amazing cool fun new old big small little nice great
    good bad best better last next much many get got getting go going went gone make made
    take took feel felt think thought know knew want wanted need needed love loved glad
    say said tell told see saw seen look looking looks keep kept come came
""".split())  # noqa: SIM905 - readable as prose


def normalise(name: str) -> str:
    """The key an entity is matched by: case-folded, whitespace collapsed, a trailing
    ``()`` and possessive ``'s`` removed."""
    key = " ".join(name.split()).casefold()
    if key.endswith("()"):
        key = key[:-2]
    return _POSSESSIVE.sub("", key)


# A sentence end starts only at the first mark of a run (the lookbehind) and takes the run
# whole (possessive): a run of 100,000 dots is read once, not once per dot.
_SENTENCE_BREAK = re.compile(r"(?<![.!?])[.!?]++[\"')\]]*+\s+|\n\s*")
_LOWER_WORD = re.compile(r"\w+")


def _sentence_starts(text: str) -> set[int]:
    starts = {0}
    for m in _SENTENCE_BREAK.finditer(text):
        starts.add(m.end())
    return starts


def _has_word(word: str, text: str, words: set[str]) -> bool:
    """Whether `word` occurs in `text` between word boundaries. A plain word is looked up in
    the text's words (one scan for all names); one with an apostrophe, rare, is searched."""
    if word.isalnum():
        return word in words
    return re.search(rf"\b{re.escape(word)}\b", text) is not None


def _names(text: str, starts: set[int]) -> Iterable[tuple[int, int, str]]:
    lower_words: set[str] | None = None
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        pos = m.start()
        # Drop leading and trailing words that are common anywhere (stop words, openers);
        # by index, so a long run of them costs its length, not its length squared.
        lo, hi = 0, len(words)
        while lo < hi and (_POSSESSIVE.sub("", words[lo]).casefold() in _NOT_NAME):
            pos += len(words[lo]) + 1
            lo += 1
        while hi > lo and (_POSSESSIVE.sub("", words[hi - 1]).casefold() in _NOT_NAME):
            hi -= 1
        if lo == hi:
            continue
        words = words[lo:hi]
        words[-1] = _POSSESSIVE.sub("", words[-1])
        if len(words) == 1 and len(words[0]) < 2:
            continue
        if len(words) == 1 and pos in starts:
            if lower_words is None:
                lower_words = set(_LOWER_WORD.findall(text))
            if _has_word(words[0].lower(), text, lower_words):
                continue  # "Pottery was fun ... my pottery": a common word opening a sentence
        value = " ".join(words)
        yield pos, pos + len(value), value


def _identifiers(text: str) -> Iterable[tuple[int, int, str]]:
    for m in _DOTTED.finditer(text):
        value = m.group(0)
        parts = value.removesuffix("()").split(".")
        # "e.g", "i.e", "a.m" are abbreviations; "v1.2" is a version: not identifiers.
        if max(len(p) for p in parts) < 2 or any(p[0].isdigit() for p in parts):
            continue
        yield m.start(), m.end(), value.removesuffix("()")
    for m in _CALL.finditer(text):
        yield m.start(), m.end(1), m.group(1)
    for pattern in (_SNAKE, _CAMEL):
        for m in pattern.finditer(text):
            yield m.start(), m.end(), m.group(0)


def _phrase_spans(text: str) -> dict[str, tuple[int, int]]:
    """Each candidate noun phrase with the span of its first occurrence in `text`."""
    runs: list[list[tuple[str, int, int]]] = [[]]
    for m in _WORDS.finditer(text):
        word = m.group(0).lower().strip("'-")
        if (not word or not word.isalpha() or len(word) < 3 or word in _PHRASE_STOP
                or word.endswith("ly")):
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((word, m.start(), m.end()))
    out: dict[str, tuple[int, int]] = {}
    for run in runs:
        for n in (2, 3):
            for i in range(len(run) - n + 1):
                last = run[i + n - 1][0]
                if len(last) > 4 and last.endswith("ed"):
                    continue  # "agency helped": a past-tense verb, not a noun head
                phrase = " ".join(w for w, _, _ in run[i : i + n])
                out.setdefault(phrase, (run[i][1], run[i + n - 1][2]))
    return out


def noun_phrases(text: str) -> list[str]:
    """Candidate noun phrases: every 2- and 3-word run of content words (lowercase, no
    stop words, no filler like "really great"), in order, without duplicates."""
    return list(_phrase_spans(clip_long_words(text)))


class PhraseCounter:
    """Counts in how many memories each candidate noun phrase appears; a phrase becomes an
    entity once it appears in at least ``min_count`` of them.

    Memory use is bounded: at most ``max_phrases`` candidates are tracked (the rarest are
    pruned when the table is full), and only the first ``min_count`` memory ids per phrase.
    """

    def __init__(self, min_count: int = 3, max_phrases: int = 200_000) -> None:
        if min_count < 1:
            raise ValueError(f"min_count {min_count}: must be at least 1")
        self.min_count = min_count
        self.max_phrases = max_phrases
        self._count: dict[str, int] = {}
        self._first: dict[str, list[str]] = {}

    def add(self, memory_id: str, text: str) -> dict[str, tuple[str, ...]]:
        """Count this memory's phrases; return the phrases that became frequent with it,
        each with the memories (this one included) that hold it, so they can be linked."""
        promoted: dict[str, tuple[str, ...]] = {}
        for phrase in noun_phrases(text):
            c = self._count.get(phrase, 0) + 1
            self._count[phrase] = c
            if c < self.min_count:
                self._first.setdefault(phrase, []).append(memory_id)
            elif c == self.min_count:
                promoted[phrase] = (*self._first.pop(phrase, []), memory_id)
        if len(self._count) > self.max_phrases:
            self._prune()
        return promoted

    def _prune(self) -> None:
        keep = sorted(self._count.items(), key=lambda kv: -kv[1])[: self.max_phrases // 2]
        self._count = dict(keep)
        self._first = {p: ids for p, ids in self._first.items() if p in self._count}

    def is_frequent(self, phrase: str) -> bool:
        """True once `phrase` has appeared in at least ``min_count`` memories."""
        return self._count.get(phrase, 0) >= self.min_count

    def frequent(self, text: str) -> list[str]:
        """The candidate phrases of `text` that are already frequent."""
        return [p for p in noun_phrases(text) if self.is_frequent(p)]

    def __len__(self) -> int:
        return len(self._count)


def extract_entities(text: str, *, phrases: PhraseCounter | None = None) -> list[str]:
    """Names, code identifiers and (with `phrases`) frequent noun phrases of `text`, in
    order of first appearance, one per normalised key, in display form.

    Where matches overlap, the longest wins ("Field.remember" over "Field" and "remember",
    "KnowledgeGraph" over "Knowledge", "pottery class" over a sentence-initial "Pottery").

    Linear in the text: a run of more than 64 word characters is no entity and is skipped
    (see `clip_long_words`), and overlaps are settled on a map of covered characters.
    """
    text = clip_long_words(text)
    found: list[tuple[int, int, str]] = []
    found.extend(_identifiers(text))
    found.extend(_names(text, _sentence_starts(text)))
    if phrases is not None:
        for p, (start, end) in _phrase_spans(text).items():
            if phrases.is_frequent(p):
                found.append((start, end, p))
    # Kept spans never overlap, so each character is marked at most once; a candidate is
    # kept when no character of its span is marked yet (one memchr over the span).
    covered = bytearray(len(text) + 1)
    kept: list[tuple[int, int, str]] = []
    for start, end, value in sorted(found, key=lambda x: (x[0] - x[1], x[0])):  # longest first
        if covered.find(1, start, end) < 0:
            covered[start:end] = b"\x01" * (end - start)
            kept.append((start, end, value))
    seen: set[str] = set()
    out: list[str] = []
    for _, _, value in sorted(kept):
        key = normalise(value)
        if key and key not in seen:
            seen.add(key)
            out.append(value)
    return out
