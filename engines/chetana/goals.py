"""Reading goals out of text for Sankalpa: the 18 intent phrases, goal keywords, the
overlap that makes a goal a re-mention, and the FNV-1a ids of intentions."""

from __future__ import annotations

import re

__all__ = [
    "FNV_OFFSET",
    "FNV_PRIME",
    "GOAL_STOP_WORDS",
    "INTENT_PATTERNS",
    "extract_goals",
    "extract_keywords",
    "fnv1a_32",
    "fold_word",
    "intention_id",
    "normalize_goal",
    "overlap",
    "word_overlap",
    "words",
]

FNV_OFFSET = 0x811C9DC5
FNV_PRIME = 0x01000193

# fmt: off
INTENT_PATTERNS: tuple[str, ...] = (
    "i want to ", "let's ", "let us ", "goal is ", "we need to ", "fix the ", "add a ",
    "add an ", "implement ", "create a ", "build a ", "write a ", "remove ", "delete ",
    "update ", "change ", "make ", "refactor ",
)
# fmt: on

# fmt: off
GOAL_STOP_WORDS: frozenset[str] = frozenset((
    "the", "a", "an", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had",
    "do", "does", "did", "will", "would", "could", "should", "may", "might", "shall", "can",
    "to", "of", "in", "for", "on", "with", "at", "by", "from", "and", "or", "but", "not",
    "this", "that", "it", "its",
))
# fmt: on


# Each phrase with its rank; the typographic apostrophe spelling of "let's" ranks with it.
_SEARCH: tuple[tuple[int, str], ...] = (
    *enumerate(INTENT_PATTERNS),
    (INTENT_PATTERNS.index("let's "), "let’s "),
)
# Case-insensitive twin of the search, for the rare text whose lowercase changes length
# (then indices into the lowercase copy would not fit the original text).
_INTENT = re.compile(
    "|".join(f"({re.escape(p).replace(chr(39), '[’' + chr(39) + ']')})" for p in INTENT_PATTERNS),
    re.IGNORECASE,
)
# A word every phrase contains (whole, at a word start), to rule messages out cheaply.
# fmt: off
_KEY_WORDS = frozenset((
    "want", "let", "goal", "need", "fix", "add", "implement", "create", "build", "write",
    "remove", "delete", "update", "change", "make", "refactor",
))
# fmt: on
# ASCII text through bytes.translate: letters lowercased, digits kept, the rest a space.
_PUNCT_TO_SPACE = bytes(ord(chr(c).lower()) if chr(c).isalnum() else 32 for c in range(128))
_PUNCT_TO_SPACE += bytes([32]) * 128  # never met: only ASCII text takes this path
_GOAL_END = re.compile(r"[.!?,]")
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
_KEYWORD_SPLIT = re.compile(r"[^a-z0-9]+")
_TOKEN = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """The lowercase [a-z0-9]+ words of a text (tool results are matched word by word)."""
    if text.isascii():  # same words, several times faster than the regex
        return text.encode("ascii").translate(_PUNCT_TO_SPACE).decode("ascii").split()
    return _TOKEN.findall(text.lower())


def fnv1a_32(text: str) -> int:
    """FNV-1a 32-bit hash of the UTF-8 bytes of `text`."""
    h = FNV_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return h


def normalize_goal(goal: str) -> str:
    """The text an intention id is computed from: lowercase, whitespace collapsed."""
    return " ".join(goal.lower().split())


def intention_id(goal: str) -> str:
    """FNV-1a 32-bit of the normalized goal, lowercase hex (no padding, as the original)."""
    return format(fnv1a_32(normalize_goal(goal)), "x")


def extract_keywords(text: str) -> frozenset[str]:
    """Words of 3+ characters split on [^a-z0-9]+, without the 42 goal stop words."""
    stop = GOAL_STOP_WORDS
    return frozenset(w for w in _KEYWORD_SPLIT.split(text.lower()) if len(w) >= 3 and w not in stop)


def word_overlap(a: str, b: str) -> float:
    """Overlap coefficient |A ∩ B| / min(|A|, |B|) of two texts' keywords (0 if either has
    none); the seed calls it Jaccard-like, the original code computes this."""
    return overlap(extract_keywords(a), extract_keywords(b))


def _is_word_char(char: str) -> bool:
    return "a" <= char <= "z" or "0" <= char <= "9"


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Overlap coefficient of two keyword sets."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def fold_word(word: str) -> str:
    """Plural folding for progress matching: \"tests\" and \"test\" meet."""
    return word[:-1] if len(word) > 3 and word[-1] == "s" else word


def extract_goals(message: str) -> list[str]:
    """Goals signalled in a message, in the original's order (pattern by pattern, each by
    position): the text after an intent phrase up to . ! ? or a comma, compound goals split
    at "and", whitespace collapsed."""
    found: list[tuple[int, int, str]] = []
    # Most messages carry no intent phrase: a phrase at a word start leaves its key word
    # whole once punctuation becomes space, so no key word means no goal.
    if message.isascii() and _KEY_WORDS.isdisjoint(
        message.encode("ascii").translate(_PUNCT_TO_SPACE).decode("ascii").split()
    ):
        return []
    lower = message.lower()
    probe = lower  # where word boundaries are checked
    if len(lower) == len(message):
        hits = []
        for rank, phrase in _SEARCH:
            pos = lower.find(phrase)
            while pos != -1:
                hits.append((rank, pos, pos + len(phrase)))
                pos = lower.find(phrase, pos + 1)
    else:
        probe = message
        hits = [((m.lastindex or 1) - 1, m.start(), m.end()) for m in _INTENT.finditer(message)]
    for rank, pos, end in hits:
        # A phrase counts only at a word start: the original's substring search fired
        # "change " inside "exchange " and "make " inside "remake ".
        if pos and _is_word_char(probe[pos - 1].lower()):
            continue
        stop = _GOAL_END.search(message, end)
        text = message[end : stop.start() if stop else len(message)].strip()
        if text:
            found.append((rank, pos, text))
    found.sort(key=lambda item: (item[0], item[1]))
    goals = []
    for _, _, text in found:
        for part in _AND.split(text) if " " in text else (text,):
            goal = " ".join(part.split())
            if goal:
                goals.append(goal)
    return goals
