"""Which recalled memories a committed turn used: the evidence `memory.learn` feeds back.

With `memory: {learn: true}`, every memory a `memory.recall` step showed the model this turn
is judged *used* or *not used*, and `MemoryBridge.feedback` tells the field
(`Field.feedback`: the memory's confidence, and the Thompson learner's parameters that
surfaced it). What counts as use, in order:

1. **Explicit.** A recall step with `ask_used: true` shows its memories with their ids and
   asks the model to list the ones it used in a `<used>id, id</used>` section. When any call
   of the turn wrote such a section, it decides alone: the ids it names (an id or a unique
   prefix of at least 6 characters) are used, every other shown memory is not.
2. **Lexical.** The memory's content words that the user's message does not already hold (a
   memory echoing the question tells nothing) are looked up in what the soul wrote this turn
   (the reply and every other model-written output: the monologue, notes). It is used when
   at least `overlap` of them (default 0.3; never more than 5 words needed) appear.
3. **Semantic.** Where the soul recalls with embeddings (any recall mode but `keyword`), the
   cosine between the memory and what the soul wrote (its first `WRITTEN_CHARS` characters)
   at or above `similarity` (default 0.6) also counts.

Everything here is linear in the texts: one regex pass per text, set lookups.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LearnConfig", "RecallUse", "Shown", "content_words", "explicit_used", "judge", "learn_config",
    "lexically_used", "recall_use",
]

WRITTEN_CHARS = 4000  # what of the soul's text the semantic check embeds (the model reads ~256 tokens)
MAX_WORDS_NEEDED = 5  # shared content words that prove use whatever the memory's length
MIN_PREFIX = 6  # a shorter id prefix in <used> is ignored: it could name several memories

_WORD = re.compile(r"[^\W_]+")
_USED = re.compile(r"<used\s*>([^<]*)</used\s*>", re.IGNORECASE)
_ID_SPLIT = re.compile(r"[\s,;\[\]]+")
_STOP = frozenset("""
about above after again against also among and any are aren because been before being below
between both but can cannot could did does doing don down during each few for from further
had has have having her here hers herself him himself his how i'm into its itself just let
more most much must myself nor not now off once only other ought our ours ourselves out over
own same she should some such than that the their theirs them themselves then there these
they this those through too under until very was were what when where which while who whom
why will with would you your yours yourself yourselves user soul said says say tell told
""".split())  # noqa: SIM905 - a word list reads best as text


@dataclass(frozen=True)
class LearnConfig:
    """`memory.learn` as the runtime uses it (`learn: true` is all defaults)."""

    overlap: float = 0.3
    similarity: float | None = 0.6  # None: no semantic check


def learn_config(block: Mapping[str, Any] | None) -> LearnConfig | None:
    """The learning options of a blueprint's `memory` block; None when learning is off."""
    if not block or block.get("enabled", True) is False:
        return None
    raw = block.get("learn")
    if raw is True:
        return LearnConfig()
    if not isinstance(raw, Mapping) or raw.get("enabled", True) is False:
        return None
    default = LearnConfig()
    overlap = raw.get("overlap", default.overlap)
    similarity = raw.get("similarity", default.similarity)
    return LearnConfig(float(overlap), None if similarity is None else float(similarity))


@dataclass(frozen=True)
class Shown:
    """One memory a recall step showed the model this turn."""

    id: str
    text: str


@dataclass(frozen=True)
class RecallUse:
    """What a committed turn recalled and wrote: the input of `MemoryBridge.feedback`."""

    shown: tuple[Shown, ...]
    written: str  # what the soul wrote this turn: the reply and its other model outputs
    query: str  # the user's message (its words prove nothing)
    explicit: frozenset[str] | None  # ids a <used> section named; None: no section written
    semantic: bool  # whether the soul's recalls use embeddings (so the semantic check is cheap)
    config: LearnConfig


def content_words(text: str) -> set[str]:
    """The words of `text` that carry content: lowercased, 3+ characters (or holding a
    digit), stop words dropped, a plural `s` cut."""
    out = set()
    for match in _WORD.finditer(text.lower()):
        word = match.group(0)
        if len(word) < 3 and not any(c.isdigit() for c in word):
            continue
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word)
    return out


def lexically_used(memory: str, written: set[str], query: set[str], overlap: float) -> bool:
    """Whether the soul's words (`written`) hold enough of the memory's content words that the
    question (`query`) lacks: `overlap` of them, at most `MAX_WORDS_NEEDED`."""
    news = content_words(memory) - query
    if not news:
        return False  # the memory says nothing the question did not: overlap cannot tell
    needed = max(1, min(math.ceil(overlap * len(news)), MAX_WORDS_NEEDED))
    return len(news & written) >= needed


def explicit_used(raws: Iterable[str], ids: Sequence[str]) -> frozenset[str] | None:
    """The ids of `ids` that `<used>` sections in the model's raw replies name (exactly or
    by a unique prefix of `MIN_PREFIX`+ characters); None when no reply wrote the section."""
    named: list[str] = []
    seen = False
    for raw in raws:
        for match in _USED.finditer(raw):
            seen = True
            named.extend(t for t in _ID_SPLIT.split(match.group(1)) if t)
    if not seen:
        return None
    known = set(ids)
    found = set()
    for token in named:
        if token in known:
            found.add(token)
        elif len(token) >= MIN_PREFIX:
            matches = [i for i in ids if i.startswith(token)]
            if len(matches) == 1:
                found.add(matches[0])
    return frozenset(found)


def recall_use(blueprint_memory: Mapping[str, Any] | None, steps: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]],
               raws: Sequence[str], reply: str, query: str) -> RecallUse | None:
    """What this turn recalled and wrote, for feedback; None when the soul does not learn or
    no recall step showed a memory. `steps`: the scope's planned steps (name → PlannedStep);
    `outputs`: the turn's step outputs; `raws`: the raw text of the turn's model calls."""
    config = learn_config(blueprint_memory)
    if config is None:
        return None
    default_mode = ((blueprint_memory or {}).get("recall") or {}).get("mode") or "hybrid"
    shown: dict[str, Shown] = {}
    asked = semantic = False
    written = [reply] if reply else []
    for name, step in steps.items():
        out = outputs.get(name)
        if not out:
            continue
        kind = step.kind
        if kind.name == "memory.recall":
            hits = out.get("hits") or []
            for hit in hits:
                shown.setdefault(str(hit["id"]), Shown(str(hit["id"]), str(hit.get("text") or "")))
            asked = asked or bool(out.get("ask_used"))
            semantic = semantic or (step.params.get("mode") or default_mode) != "keyword"
        elif kind.llm:
            written.extend(str(v) for v in out.values() if isinstance(v, str) and v and v != reply)
    if not shown:
        return None
    explicit = explicit_used(raws, list(shown)) if asked else None
    return RecallUse(tuple(shown.values()), "\n".join(written), query, explicit,
                     semantic and config.similarity is not None, config)


def judge(use: RecallUse, cosines: Callable[[str, Sequence[str]], Sequence[float]] | None = None) -> tuple[list[str], list[str]]:
    """(used ids, unused ids) of the memories `use` shows, by the rules in this module's
    docstring; `cosines(written, texts)` gives the semantic similarities (None: no check)."""
    if use.explicit is not None:
        return ([s.id for s in use.shown if s.id in use.explicit],
                [s.id for s in use.shown if s.id not in use.explicit])
    written = content_words(use.written)
    query = content_words(use.query)
    used = [lexically_used(s.text, written, query, use.config.overlap) for s in use.shown]
    threshold = use.config.similarity
    if cosines is not None and use.semantic and threshold is not None and use.written.strip() and not all(used):
        sims = cosines(use.written[:WRITTEN_CHARS], [s.text for s in use.shown])
        used = [u or float(c) >= threshold for u, c in zip(used, sims, strict=True)]
    return ([s.id for s, u in zip(use.shown, used, strict=True) if u],
            [s.id for s, u in zip(use.shown, used, strict=True) if not u])
