"""Text → keyword tokens for BM25: lowercase, split on non-word runs, drop stop words, stem.

The same function runs on documents and queries, so the only hard requirement is that it is
deterministic; the choices below were measured on LoCoMo (see docs/memory.md, "BM25"):
stop-word removal and a light (Porter step 1) stemmer each add recall, a full stemmer adds
little beyond step 1 and costs more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ENGLISH_STOP_WORDS", "MAX_WORD", "TextConfig", "clip_long_words", "light_stem", "tokenize"]

# Word runs of letters/digits (unicode aware); "_" is a word char in \w, so it is excluded
# to keep snake_case identifiers splitting into their words.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# No word worth a keyword or an entity is longer than this; a longer run of word characters
# (a pasted blob, a hash, an attack) is cut here, so every scan of text stays linear: the
# regexes that look inside a word (snake_case, camelCase) then never see more than this.
MAX_WORD = 64
# The lookbehind starts a match only at the beginning of a run, so each run is read once.
_LONG_WORD = re.compile(rf"(?<!\w)\w{{{MAX_WORD + 1},}}")

# The common English list (NLTK's, as used by bm25s "en"), plus contraction fragments left
# by splitting on apostrophes ("don't" → "don", "t").
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """a about above after again against ain all am an and any are aren as at be because been
    before being below between both but by can couldn d did didn do does doesn doing don down
    during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just ll m ma me mightn more
    most mustn my myself needn no nor not now o of off on once only or other our ours
    ourselves out over own re s same shan she should shouldn so some such t than that the
    their theirs them themselves then there these they this those through to too under until
    up ve very was wasn we were weren what when where which while who whom why will with won
    wouldn y you your yours yourself yourselves""".split()  # noqa: SIM905 - readable as prose
)

_VOWELS = frozenset("aeiou")


def _has_vowel(stem: str) -> bool:
    return any(c in _VOWELS for c in stem)


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w/x/y (Porter's *o condition)."""
    if len(word) < 3:
        return False
    a, b, c = word[-3], word[-2], word[-1]
    return a not in _VOWELS and b in _VOWELS and c not in _VOWELS and c not in "wxy"


@lru_cache(maxsize=65536)
def light_stem(word: str) -> str:
    """Porter's step 1 (plurals, -ed/-ing, final -y): "cats"→"cat", "hiking"→"hike".

    Why only step 1: it conflates the inflections that queries and conversation turns
    actually differ by (tense, number) without the over-stemming of the later steps
    ("university"/"universe"). Digits and short words pass through unchanged.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    # 1a: plurals
    if word.endswith(("sses", "ies")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    # 1b: -eed / -ed / -ing
    if word.endswith("eed"):
        if len(word) > 4:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix):
                stem = word[: -len(suffix)]
                if len(stem) >= 2 and _has_vowel(stem):
                    word = stem
                    if word.endswith(("at", "bl", "iz")):
                        word += "e"
                    elif len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                        word = word[:-1]
                    elif len(word) == 3 and _cvc(word):
                        word += "e"
                break
    # 1c: final y → i when the stem has a vowel ("happy"/"happiness" meet at "happi")
    if word.endswith("y") and len(word) > 2 and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    return word


@dataclass(frozen=True)
class TextConfig:
    """How text is cut into keyword tokens (the same for documents and queries)."""

    lowercase: bool = True
    stop_words: frozenset[str] = ENGLISH_STOP_WORDS
    stem: bool = True
    min_length: int = 1


DEFAULT_TEXT = TextConfig()


def clip_long_words(text: str) -> str:
    """`text` with every run of more than `MAX_WORD` word characters blanked out (replaced
    by as many spaces, so offsets into the text keep their meaning). Linear in the text."""
    return _LONG_WORD.sub(lambda m: " " * len(m.group(0)), text)


def tokenize(text: str, config: TextConfig = DEFAULT_TEXT) -> list[str]:
    """The keyword tokens of `text`, in order, duplicates kept (BM25 counts them). A token
    longer than `MAX_WORD` characters is cut to its first `MAX_WORD`."""
    if config.lowercase:
        text = text.lower()
    kept = _TOKENS.get(id(config))  # by identity: a config's hash is a Python call
    if kept is None or kept[0] is not config:
        if len(_TOKENS) >= 64:
            _TOKENS.clear()
        kept = _TOKENS[id(config)] = (config, {})
    known = kept[1]
    out: list[str] = []
    for word in _WORD.findall(text):
        tok = known.get(word)  # the same words come back: each is cut, filtered, stemmed once
        if tok is None:
            tok = _token(word, config)
            if len(word) <= MAX_WORD:  # only words as long as a token are kept
                if len(known) >= _KNOWN_WORDS:
                    known.clear()
                known[word] = tok
        if tok:
            out.append(tok)
    return out


def _token(word: str, config: TextConfig) -> str:
    """A word's token, or "" for none (too short, a stop word; a token is never empty: a
    word is a run of at least one character, and stemming keeps at least two)."""
    if len(word) > MAX_WORD:
        word = word[:MAX_WORD]
    if len(word) < config.min_length or word in config.stop_words:
        return ""
    return light_stem(word) if config.stem else word


_KNOWN_WORDS = 65_536  # words kept per config (then started over)
# id(config) -> (config, word -> its token, "" for none)
_TOKENS: dict[int, tuple[TextConfig, dict[str, str]]] = {}
