"""Fixy's detectors: when and why the observer steps in.

The reference's five rules (circular reasoning, high conflict without resolution, shallow
discussion, synthesis opportunity, meta reflection) with whole-word marker matching, plus the
two the Entelgia spec names but the original never built: topic drift (embedding distance of
the recent turns from the topic; off without an embedder) and persona collapse (an agent's
recent turns closer to another agent's persona than to its own, or converging on another
agent's recent turns). Never before turn
`min_turn` (3); the rules look at the last `window` (10) turns, Fixy's own turns included;
in the default order the first rule that fires wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import RulesError
from .turns import Turn, as_turns
from .vectors import Embedder, cosine, embed
from .words import (
    CONFLICT_MARKERS,
    DEPTH_MARKERS,
    SYNTHESIS_MARKERS,
    count_marked,
    jaccard,
    keywords,
)

__all__ = [
    "DETECTORS",
    "FALLBACKS",
    "INSTRUCTIONS",
    "Detection",
    "DetectorRules",
    "Scan",
    "detect",
    "intervention_prompt",
    "scan",
    "trim_intervention",
]

DETECTORS: tuple[str, ...] = (
    "circular_reasoning", "high_conflict", "shallow_discussion", "synthesis_opportunity",
    "meta_reflection", "topic_drift", "persona_collapse",
)
"""Every detector's name, in the default order (the original's five first)."""

INSTRUCTIONS: dict[str, str] = {
    "circular_reasoning": "The dialogue is going in circles: the same ideas keep returning in the same words. "
                          "Name the shared premise both sides keep restating and ask for one new angle or a concrete example.",
    "high_conflict": "The disagreement keeps escalating without resolution. Name what the disagreement is really about "
                     "and propose one step toward common ground.",
    "shallow_discussion": "The exchange stays on the surface: short turns with no reasons. Ask one 'why' question "
                          "that would take the discussion deeper.",
    "synthesis_opportunity": "Several views are on the table and nobody has connected them. Point out a thread that "
                             "could join them and invite a synthesis.",
    "meta_reflection": "Step back and reflect on the dialogue itself: what has been learned, and where is it stuck?",
    "topic_drift": "The dialogue has drifted away from its topic. Name the topic and bring the speakers back to it.",
    "persona_collapse": "The speakers' voices are merging: one now sounds like the other. Remind them of their distinct "
                        "perspectives and ask each to speak from their own.",
}
"""Each detector's instruction for the intervention prompt."""

FALLBACKS: dict[str, str] = {
    "circular_reasoning": "We keep returning to the same point. What concrete example would move us forward?",
    "high_conflict": "The disagreement is escalating. What is the one thing you both accept, and where exactly do you part?",
    "shallow_discussion": "We are staying on the surface. Why does this matter, and what lies underneath it?",
    "synthesis_opportunity": "There are good ideas on the table. How do they fit together?",
    "meta_reflection": "Let us pause. What have we learned so far, and where are we stuck?",
    "topic_drift": "We have wandered from the topic. How does this bring us back to it?",
    "persona_collapse": "Your voices are starting to sound alike. Speak again from your own perspective.",
}
"""What Fixy says when the model fails to write the intervention."""


@dataclass(frozen=True)
class DetectorRules:
    """Every threshold of the detectors (the reference's values by default). Comparisons:
    circular when >= `circular_pairs` pairs have Jaccard > `circular_similarity` among >=
    `circular_min_turns` turns; conflict when turn >= `conflict_min_turn` and the share of
    turns with a conflict marker > `conflict_share`; shallow when turn >= `shallow_min_turn`,
    >= `shallow_min_turns` turns, mean length < `shallow_mean_length` characters and the
    depth share < `shallow_depth_share`; synthesis when turn >= `synthesis_min_turn` and none
    of the last `synthesis_lookback` turns carries a synthesis marker; meta reflection when
    turn > `meta_after` and turn % `meta_every` == 0; drift when 1 − mean cosine(recent turn,
    topic) over the last `drift_recent` non-Fixy turns > `drift_distance`; collapse when an
    agent with >= `collapse_min_turns` turns in the window is, over its last `collapse_recent`
    turns, more similar to another agent's persona than to its own by more than
    `collapse_margin`, or when two such agents' last `collapse_recent` turns have a
    similarity >= `collapse_convergence_cosine` (embedder) / `collapse_convergence_jaccard`
    (keywords)."""

    window: int = 10
    min_turn: int = 3
    circular_min_turns: int = 4
    circular_similarity: float = 0.5
    circular_pairs: int = 3
    conflict_min_turn: int = 6
    conflict_share: float = 0.6
    shallow_min_turn: int = 10
    shallow_min_turns: int = 6
    shallow_mean_length: float = 150.0
    shallow_depth_share: float = 0.3
    synthesis_min_turn: int = 5
    synthesis_lookback: int = 3
    meta_after: int = 15
    meta_every: int = 15
    drift_distance: float = 0.75
    drift_recent: int = 3
    collapse_recent: int = 3
    collapse_min_turns: int = 2
    collapse_margin: float = 0.05
    collapse_convergence_jaccard: float = 0.5
    collapse_convergence_cosine: float = 0.9
    prompt_turns: int = 6
    prompt_turn_chars: int = 300

    def __post_init__(self) -> None:
        if self.window < 1 or self.meta_every < 1:
            raise RulesError(f"window and meta_every must be >= 1 (got {self.window}, {self.meta_every})")


@dataclass(frozen=True)
class Detection:
    """A detector that fired: its `reason` (a name of `DETECTORS`), its `evidence` (the
    numbers it compared), an optional `detail` (e.g. which agent collapsed), the reason's
    `instruction`, the full intervention `prompt` for the model, and the `fallback` text."""

    reason: str
    turn: int
    evidence: Mapping[str, float]
    instruction: str
    prompt: str
    fallback: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "turn": self.turn, "evidence": dict(self.evidence),
                "detail": self.detail, "instruction": self.instruction, "prompt": self.prompt,
                "fallback": self.fallback}


@dataclass(frozen=True)
class Scan:
    """Every detector's verdict at one turn: those that `fired` (in detector order) and those
    that were `off` with why (e.g. topic drift without an embedder)."""

    turn: int
    fired: tuple[Detection, ...]
    off: Mapping[str, str] = field(default_factory=dict)

    @property
    def first(self) -> Detection | None:
        """The detection that wins (the first that fired), or None."""
        return self.fired[0] if self.fired else None


def intervention_prompt(instruction: str, turns: Sequence[Turn], rules: DetectorRules = DetectorRules()) -> str:
    """The prompt Fixy's model answers: the reason's instruction, the last `prompt_turns` (6)
    turns (each cut to `prompt_turn_chars`), and the length rule "2-4 sentences, at most 150
    words"."""
    lines = [f"{t.speaker}: {' '.join(t.text[:rules.prompt_turn_chars].split())}" for t in turns[-rules.prompt_turns:]]
    dialogue = "\n".join(lines) if lines else "(no turns yet)"
    return (f"{instruction}\n\nRecent dialogue:\n{dialogue}\n\n"
            "Respond as the observer in 2-4 sentences, at most 150 words.")


def trim_intervention(text: str, max_sentences: int = 4, max_words: int = 150) -> str:
    """`text` held to its first `max_sentences` sentences (ending in . ! or ?) and then to
    its first `max_words` words; whitespace collapsed. Linear in the text."""
    flat = " ".join(text.split())
    sentences, start = [], 0
    for i, ch in enumerate(flat):
        if ch in ".!?" and (i + 1 == len(flat) or flat[i + 1] == " "):
            sentences.append(flat[start:i + 1].strip())
            start = i + 1
            if len(sentences) == max_sentences:
                break
    else:
        if flat[start:].strip():
            sentences.append(flat[start:].strip())
    out = " ".join(s for s in sentences if s)
    tokens = out.split(" ")
    return " ".join(tokens[:max_words]) if len(tokens) > max_words else out


def _circular(window: Sequence[Turn], turn: int, r: DetectorRules) -> dict[str, float] | None:
    if len(window) < r.circular_min_turns:
        return None
    sets = [keywords(t.text) for t in window]
    similar, best, pairs = 0, 0.0, 0
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            pairs += 1
            sim = jaccard(sets[i], sets[j])
            best = max(best, sim)
            similar += sim > r.circular_similarity
    if similar >= r.circular_pairs:
        return {"turns": len(window), "pairs": pairs, "similar_pairs": similar, "max_similarity": round(best, 4)}
    return None


def _conflict(window: Sequence[Turn], turn: int, r: DetectorRules) -> dict[str, float] | None:
    if turn < r.conflict_min_turn or not window:
        return None
    marked = count_marked((t.text for t in window), CONFLICT_MARKERS)
    share = marked / len(window)
    if share > r.conflict_share:
        return {"turns": len(window), "conflict_turns": marked, "conflict_share": round(share, 4)}
    return None


def _shallow(window: Sequence[Turn], turn: int, r: DetectorRules) -> dict[str, float] | None:
    if turn < r.shallow_min_turn or len(window) < r.shallow_min_turns:
        return None
    mean = sum(len(t.text) for t in window) / len(window)
    deep = count_marked((t.text for t in window), DEPTH_MARKERS)
    share = deep / len(window)
    if mean < r.shallow_mean_length and share < r.shallow_depth_share:
        return {"turns": len(window), "mean_length": round(mean, 2), "depth_turns": deep, "depth_share": round(share, 4)}
    return None


def _synthesis(window: Sequence[Turn], turn: int, r: DetectorRules) -> dict[str, float] | None:
    if turn < r.synthesis_min_turn or len(window) < r.synthesis_lookback:
        return None
    if count_marked((t.text for t in window[-r.synthesis_lookback:]), SYNTHESIS_MARKERS) == 0:
        return {"turns_without_synthesis": r.synthesis_lookback}
    return None


def _meta(window: Sequence[Turn], turn: int, r: DetectorRules) -> dict[str, float] | None:
    if turn > r.meta_after and turn % r.meta_every == 0:
        return {"turn": turn}
    return None


def _drift(window: Sequence[Turn], topic: str | None, embedder: Embedder | None,
           r: DetectorRules) -> tuple[dict[str, float] | None, str | None]:
    if embedder is None:
        return None, "no embedder given: topic drift needs one"
    if not topic:
        return None, "no topic given"
    recent = [t.text for t in window if not t.is_fixy][-r.drift_recent:]
    if len(recent) < r.drift_recent:
        return None, None
    vectors = embed(embedder, [topic, *recent])
    mean = sum(cosine(vectors[0], v) for v in vectors[1:]) / len(recent)
    distance = 1.0 - mean
    if distance > r.drift_distance:
        return {"distance": round(distance, 4), "threshold": r.drift_distance, "turns": len(recent)}, None
    return None, None


def _recent_by_agent(window: Sequence[Turn], r: DetectorRules) -> dict[str, str]:
    """Each agent with >= `collapse_min_turns` turns in the window: its last
    `collapse_recent` turns joined (agents in order of first appearance)."""
    turns: dict[str, list[str]] = {}
    for t in window:
        if not t.is_fixy:
            turns.setdefault(t.speaker, []).append(t.text)
    return {a: " ".join(texts[-r.collapse_recent:]) for a, texts in turns.items() if len(texts) >= r.collapse_min_turns}


def _collapse(window: Sequence[Turn], personas: Mapping[str, str] | None, embedder: Embedder | None,
              r: DetectorRules) -> tuple[dict[str, float] | None, str, str | None]:
    """(a) An agent's recent turns closer to another agent's persona than to its own (needs
    the personas); else (b) two agents' recent turns converging on each other: similarity >=
    `collapse_convergence_cosine` (with an embedder) or `collapse_convergence_jaccard` (keyword
    Jaccard, without one). The widest gap of (a) wins, else the most similar pair of (b)."""
    recent = _recent_by_agent(window, r)
    why = None
    best: tuple[float, dict[str, float], str] | None = None
    if personas and len(personas) >= 2:
        names = list(personas)
        persona_vectors = embed(embedder, [personas[n] for n in names]) if embedder is not None else None
        for agent in (a for a in names if a in recent):
            if persona_vectors is not None and embedder is not None:
                vec = embed(embedder, [recent[agent]])[0]
                sims = {n: cosine(vec, persona_vectors[i]) for i, n in enumerate(names)}
            else:
                kw = keywords(recent[agent])
                sims = {n: jaccard(kw, keywords(personas[n])) for n in names}
            own = sims[agent]
            other_name = max((n for n in names if n != agent), key=lambda n: sims[n])
            gap = sims[other_name] - own
            if gap > r.collapse_margin and (best is None or gap > best[0]):
                evidence = {"own_similarity": round(own, 4), "other_similarity": round(sims[other_name], 4),
                            "margin": r.collapse_margin}
                best = (gap, evidence, f"{agent} sounds like {other_name}")
        if best is not None:
            return best[1], best[2], None
    else:
        why = "no personas given: only the agents' recent turns are compared with each other"
    agents = list(recent)
    if len(agents) < 2:
        return None, "", why
    threshold = r.collapse_convergence_cosine if embedder is not None else r.collapse_convergence_jaccard
    if embedder is not None:
        vectors = embed(embedder, [recent[a] for a in agents])
        similarity = {(a, b): cosine(vectors[i], vectors[j]) for i, a in enumerate(agents) for j, b in enumerate(agents) if i < j}
    else:
        sets = {a: keywords(recent[a]) for a in agents}
        similarity = {(a, b): jaccard(sets[a], sets[b]) for i, a in enumerate(agents) for b in agents[i + 1:]}
    pair = max(similarity, key=lambda p: similarity[p])
    if similarity[pair] >= threshold:
        # the later speaker of the pair is the one who converged on the other
        last = {t.speaker: k for k, t in enumerate(window)}
        follower, leader = sorted(pair, key=lambda a: last[a], reverse=True)
        evidence = {"pair_similarity": round(similarity[pair], 4), "threshold": threshold}
        return evidence, f"{follower} converges on {leader}", why
    return None, "", why


def scan(turns: Sequence[Any], turn: int | None = None, *, window: int | None = None, min_turn: int | None = None,
         topic: str | None = None, embedder: Embedder | None = None, personas: Mapping[str, str] | None = None,
         rules: DetectorRules | None = None, order: Sequence[str] | None = None, first_only: bool = False,
         **_: Any) -> Scan:
    """Run every detector at `turn` (default: the number of turns) over the last `window`
    turns of `turns` (Turns, dicts or objects with speaker/text; see `as_turn`). `window` and
    `min_turn` override `rules`. Returns the detections that fired in `order` (default
    `DETECTORS`) and the detectors that were off with why. Unknown keyword arguments are
    ignored so a caller can pass its whole context. `first_only` stops at the first detection
    (so later detectors — and their embedder calls — do not run)."""
    base = rules or DetectorRules()
    if window is not None:
        base = replace(base, window=window)
    if min_turn is not None:
        base = replace(base, min_turn=min_turn)
    history = as_turns(turns)
    now = len(history) if turn is None else turn
    names = tuple(order) if order is not None else DETECTORS
    unknown = [n for n in names if n not in DETECTORS]
    if unknown:
        raise RulesError(f"unknown detector(s) {', '.join(unknown)}; known: {', '.join(DETECTORS)}")
    off: dict[str, str] = {}
    if now < base.min_turn:
        return Scan(now, (), {n: f"before turn {base.min_turn}" for n in names})
    tail = history[-base.window:]
    fired: list[Detection] = []
    for name in names:
        detail = ""
        if name == "topic_drift":
            evidence, why = _drift(tail, topic, embedder, base)
        elif name == "persona_collapse":
            evidence, detail, why = _collapse(tail, personas, embedder, base)
        else:
            rule = {"circular_reasoning": _circular, "high_conflict": _conflict, "shallow_discussion": _shallow,
                    "synthesis_opportunity": _synthesis, "meta_reflection": _meta}[name]
            evidence, why = rule(tail, now, base), None
        if why:
            off[name] = why
        if evidence is not None:
            fired.append(Detection(name, now, evidence, INSTRUCTIONS[name],
                                   intervention_prompt(INSTRUCTIONS[name], tail, base), FALLBACKS[name], detail))
            if first_only:
                break
    return Scan(now, tuple(fired), off)


def detect(turns: Sequence[Any], turn: int | None = None, *, window: int | None = None, min_turn: int | None = None,
           topic: str | None = None, embedder: Embedder | None = None, personas: Mapping[str, str] | None = None,
           rules: DetectorRules | None = None, order: Sequence[str] | None = None, **context: Any) -> Detection | None:
    """The first detector that fires (see `scan`), or None."""
    return scan(turns, turn, window=window, min_turn=min_turn, topic=topic, embedder=embedder,
                personas=personas, rules=rules, order=order, first_only=True, **context).first
