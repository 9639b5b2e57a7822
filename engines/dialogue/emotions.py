"""Emotions, model-free: a lexicon detector that gives each turn an emotion and an intensity.

The original asked the model for "emotion + intensity" after every turn; here a lexicon does
it, so a scripted dialogue reproduces and nothing waits on a model. One pass over the words
(linear in the text), whole words only ("mad" is not in "madness", "fear" not in
"fearless"), negation-aware: a lexicon word with a negator among the three words before it
("not afraid", "never felt guilty", "isn't angry") does not count, unless a contrast word
("but", "yet", "however", "although", "though") stands between them.

For each emotion, score = Σ weight of its words found (a word right after an intensifier —
"very", "deeply", "utterly", ... — counts 1.5 times its weight). The emotion is the one of
highest score (ties: the order of `EMOTIONS`); `neutral` with intensity 0 when nothing is
found. intensity = min(1, score + 0.1 · min(number of "!", 2)). Weights are 0.4 (mild:
"annoyed", "uneasy"), 0.6 (plain: "angry", "afraid") and 0.8 (strong: "furious",
"terrified"): one plain word gives 0.6, a strong one or an intensified plain one 0.8–0.9,
past the DefenseMechanism's 0.75.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .words import words

__all__ = ["EMOTIONS", "LEXICON", "NEUTRAL", "Emotion", "detect_emotion"]

NEUTRAL = "neutral"

EMOTIONS: tuple[str, ...] = ("anger", "frustration", "fear", "anxiety", "shame", "guilt", "sadness", "joy")
"""The emotions the lexicon knows, in tie-break order (`neutral` when none is found)."""

MILD, PLAIN, STRONG = 0.4, 0.6, 0.8


def _weights(mild: str = "", plain: str = "", strong: str = "") -> dict[str, float]:
    table = {w: MILD for w in mild.split()}
    table.update({w: PLAIN for w in plain.split()})
    table.update({w: STRONG for w in strong.split()})
    return table


LEXICON: dict[str, dict[str, float]] = {
    "anger": _weights(
        mild="annoyed annoying irritated irritating irked",
        plain="angry anger angered resent resentment resentful hostile hostility outrage indignant bitter hate hated",
        strong="furious fury rage raging enraged livid outraged infuriated infuriating seething wrath hatred"),
    "frustration": _weights(
        mild="stuck tedious tiresome",
        plain="frustrated frustrating frustration exasperated exasperating pointless futile fruitless",
        strong="maddening hopeless exasperation"),
    "fear": _weights(
        mild="wary uneasy",
        plain="afraid fear fears feared frightened scared threat threatened alarmed dread",
        strong="terrified terror terrifying horrified horror petrified panic panicked"),
    "anxiety": _weights(
        mild="unsettled restless",
        plain="anxious anxiety worried worry worries worrying nervous tense insecure",
        strong="overwhelmed distressed agitated"),
    "shame": _weights(
        mild="awkward embarrassing",
        plain="ashamed shame shameful embarrassed humiliating disgraceful",
        strong="humiliated mortified disgraced"),
    "guilt": _weights(
        mild="sorry regret regrets",
        plain="guilty guilt blame blamed remorse apologize apologise",
        strong="remorseful unforgivable"),
    "sadness": _weights(
        mild="disappointed disappointing lonely",
        plain="sad sadness unhappy grief sorrow melancholy",
        strong="heartbroken despair miserable devastated grieving"),
    "joy": _weights(
        mild="glad pleased hopeful",
        plain="happy joy joyful delighted grateful enjoy enjoyed excited cheerful",
        strong="thrilled elated ecstatic overjoyed wonderful delightful"),
}
"""Each emotion's words (lower case, whole words) and their weights."""

NEGATORS: frozenset[str] = frozenset({
    "not", "no", "never", "nor", "neither", "without", "hardly", "barely", "nothing", "none", "cannot",
    "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't", "can't", "couldn't",
    "shouldn't", "wouldn't", "haven't", "hasn't", "hadn't", "ain't",
})
"""A negator among the `NEGATION_REACH` words before a lexicon word cancels it."""

INTENSIFIERS: frozenset[str] = frozenset({
    "very", "so", "extremely", "really", "deeply", "utterly", "completely", "totally", "terribly",
    "incredibly", "absolutely", "truly", "profoundly", "intensely", "awfully",
})
"""The word right before a lexicon word multiplies its weight by `INTENSIFY`."""

NEGATION_REACH = 3
INTENSIFY = 1.5
EXCLAMATION = 0.1  # added per "!" (at most two) to a detected emotion's intensity
MAX_EXCLAMATIONS = 2


CONTRASTS: frozenset[str] = frozenset({"but", "yet", "however", "although", "though"})
"""A negation does not reach past these ("not afraid, but furious": furious counts)."""


def _negated(tokens: list[str], i: int) -> bool:
    for t in reversed(tokens[max(0, i - NEGATION_REACH):i]):
        if t in CONTRASTS:
            return False
        if t in NEGATORS:
            return True
    return False


@dataclass(frozen=True)
class Emotion:
    """A turn's emotion: its `name` (one of `EMOTIONS`, or `neutral`), its `intensity` in
    [0, 1], and the lexicon words that decided it (`cues`, in text order)."""

    name: str
    intensity: float
    cues: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "intensity": self.intensity, "cues": list(self.cues)}


def detect_emotion(text: str, lexicon: Mapping[str, Mapping[str, float]] | None = None) -> Emotion:
    """The emotion of `text` by the lexicon (see the module docstring for the rule): one pass
    over its words, whole words only, negated words left out. `lexicon` replaces `LEXICON`
    (emotion → word → weight; its order breaks ties)."""
    table = LEXICON if lexicon is None else lexicon
    index: dict[str, tuple[str, float]] = {}
    for emotion, entries in table.items():
        for word, weight in entries.items():
            index.setdefault(word.lower(), (emotion, float(weight)))
    tokens = words(text.replace("\u2019", "'"))
    scores: dict[str, float] = {}
    cues: dict[str, list[str]] = {}
    for i, token in enumerate(tokens):
        hit = index.get(token)
        if hit is None:
            continue
        if _negated(tokens, i):
            continue
        emotion, weight = hit
        if i > 0 and tokens[i - 1] in INTENSIFIERS:
            weight *= INTENSIFY
        scores[emotion] = scores.get(emotion, 0.0) + weight
        cues.setdefault(emotion, []).append(token)
    if not scores:
        return Emotion(NEUTRAL, 0.0)
    order = list(table)
    best = max(scores, key=lambda e: (scores[e], -order.index(e)))
    bonus = EXCLAMATION * min(text.count("!"), MAX_EXCLAMATIONS)
    return Emotion(best, round(min(1.0, scores[best] + bonus), 4), tuple(cues[best]))
