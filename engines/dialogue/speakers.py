"""Speaker selection: who speaks next (Entelgia's enhanced policy, legacy alternation, random).

Policies are plain functions `(SpeakerRequest, random.Random) -> str` kept in the registry
`speaker_policies`; `register_speaker_policy` adds one under a new name, and a blueprint names
the one it wants. Every random draw goes through the `random.Random` passed in, so a run
reproduces from its seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .errors import RulesError
from .turns import Turn
from .words import keywords

__all__ = [
    "SpeakerPolicy",
    "SpeakerRequest",
    "SpeakerRules",
    "engagement_scores",
    "fixy_eligibility",
    "register_speaker_policy",
    "repetition_detected",
    "select_speaker",
    "speaker_policies",
]


@dataclass(frozen=True)
class SpeakerRules:
    """The constants of speaker selection (the reference's values by default).

    `first` speaks turn 1 (None: the first agent); nobody speaks more than `max_consecutive`
    turns running; the `observer` (Fixy; None for no observer) may speak from turn
    `observer_min_turn`, not within `observer_cooldown` turns of its last turn, with
    probability `observer_probability` (`observer_repetition_probability` when repetition is
    detected); in legacy mode it speaks every `observer_every` turns instead. The engagement
    score counts appearances over the last `engagement_window` turns."""

    first: str | None = "Socrates"
    max_consecutive: int = 2
    observer: str | None = "Fixy"
    observer_min_turn: int = 4
    observer_cooldown: int = 3
    observer_probability: float = 0.20
    observer_repetition_probability: float = 0.35
    observer_every: int = 5
    engagement_window: int = 10

    def __post_init__(self) -> None:
        if self.max_consecutive < 1:
            raise RulesError(f"max_consecutive must be >= 1, got {self.max_consecutive}")
        for name in ("observer_probability", "observer_repetition_probability"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise RulesError(f"{name} must be within [0, 1], got {value}")


@dataclass(frozen=True)
class SpeakerRequest:
    """What a policy sees: the `agents` who take turns (the observer is not one of them), the
    `history` so far, the number of the `turn` being chosen (1-based: len(history) + 1 in a
    fresh dialogue), the rules, and each agent's conflict index (missing: 0)."""

    agents: tuple[str, ...]
    history: tuple[Turn, ...]
    turn: int
    rules: SpeakerRules = SpeakerRules()
    conflict: Mapping[str, float] = field(default_factory=dict)


SpeakerPolicy = Callable[[SpeakerRequest, random.Random], str]


def repetition_detected(history: Sequence[Turn]) -> bool:
    """The reference's quick repetition check behind Fixy's raised probability: over the last
    5 turns, the keyword sets (words longer than 4 characters) of each turn's first 100
    characters; a pair repeats when |A ∩ B| / max(|A|, |B|) > 0.6; repetition is detected
    when at least 2 of the (up to 10) pairs repeat."""
    tail = history[-5:]
    if len(tail) < 3:
        return False
    sets = [keywords(t.text[:100]) for t in tail]
    repeats = 0
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            a, b = sets[i], sets[j]
            if a and b and len(a & b) / max(len(a), len(b)) > 0.6:
                repeats += 1
    return repeats >= 2


def fixy_eligibility(history: Sequence[Turn], turn: int, rules: SpeakerRules = SpeakerRules()) -> tuple[bool, float]:
    """(allowed, probability) for the observer on `turn`: not before `observer_min_turn`, not
    when it spoke in the last `observer_cooldown` turns; then `observer_probability`, raised
    to `observer_repetition_probability` when `repetition_detected`."""
    if rules.observer is None or turn < rules.observer_min_turn:
        return False, 0.0
    recent = history[-rules.observer_cooldown:] if rules.observer_cooldown > 0 else ()
    if any(t.is_fixy or t.speaker == rules.observer for t in recent):
        return False, 0.0
    if repetition_detected(history):
        return True, rules.observer_repetition_probability
    return True, rules.observer_probability


def _blocked(history: Sequence[Turn], max_consecutive: int) -> str | None:
    """The speaker who already spoke the last `max_consecutive` turns running, if any."""
    if len(history) < max_consecutive:
        return None
    tail = history[-max_consecutive:]
    name = tail[-1].speaker
    return name if all(t.speaker == name for t in tail) else None


def engagement_scores(request: SpeakerRequest, candidates: Sequence[str], rng: random.Random) -> dict[str, float]:
    """Each candidate's engagement score, (10 − appearances in the last `engagement_window`
    turns + 0.1 · conflict index) × uniform(0.9, 1.2); one uniform draw per candidate, in
    the candidates' order."""
    window = request.history[-request.rules.engagement_window:]
    scores = {}
    for name in candidates:
        appearances = sum(1 for t in window if t.speaker == name)
        base = 10.0 - appearances + 0.1 * float(request.conflict.get(name, 0.0))
        scores[name] = base * rng.uniform(0.9, 1.2)
    return scores


def _first(request: SpeakerRequest) -> str:
    first = request.rules.first
    return first if first in request.agents else request.agents[0]


def _entelgia(request: SpeakerRequest, rng: random.Random) -> str:
    """Turn 1: `first`. Then: the observer with its eligibility probability (one draw when
    eligible); otherwise the highest engagement score among the agents, leaving out whoever
    spoke the last `max_consecutive` turns running (ties: the earlier agent)."""
    if not request.history:
        return _first(request)
    allowed, probability = fixy_eligibility(request.history, request.turn, request.rules)
    if allowed and rng.random() < probability:
        return str(request.rules.observer)
    blocked = _blocked(request.history, request.rules.max_consecutive)
    candidates = [a for a in request.agents if a != blocked] or list(request.agents)
    if len(candidates) == 1:
        return candidates[0]
    scores = engagement_scores(request, candidates, rng)
    return max(candidates, key=lambda name: scores[name])


def _round_robin(request: SpeakerRequest, rng: random.Random) -> str:
    """Legacy: the observer on every `observer_every`-th turn; otherwise strict alternation —
    the agent after the last agent who spoke (turn 1: `first`). Draws nothing from `rng`."""
    rules = request.rules
    if rules.observer is not None and rules.observer_every > 0 and request.turn % rules.observer_every == 0:
        return rules.observer
    last = next((t.speaker for t in reversed(request.history) if t.speaker in request.agents), None)
    if last is None:
        return _first(request)
    return request.agents[(request.agents.index(last) + 1) % len(request.agents)]


def _random(request: SpeakerRequest, rng: random.Random) -> str:
    """A uniform choice among the agents, leaving out whoever spoke the last
    `max_consecutive` turns running; never the observer."""
    blocked = _blocked(request.history, request.rules.max_consecutive)
    candidates = [a for a in request.agents if a != blocked] or list(request.agents)
    return rng.choice(candidates)


speaker_policies: dict[str, SpeakerPolicy] = {
    "entelgia": _entelgia,
    "round_robin": _round_robin,
    "random": _random,
}
"""The speaker policies by name; add your own with `register_speaker_policy`."""


def register_speaker_policy(name: str, policy: SpeakerPolicy) -> None:
    """Make `policy` selectable as `name` (replacing a policy of that name)."""
    if not isinstance(name, str) or not name:
        raise RulesError("a speaker policy needs a non-empty name")
    if not callable(policy):
        raise RulesError(f"speaker policy {name!r} must be callable (request, rng) -> speaker name")
    speaker_policies[name] = policy


def select_speaker(request: SpeakerRequest, rng: random.Random, policy: str | SpeakerPolicy = "entelgia") -> str:
    """The next speaker by the named (or given) policy. Raises `RulesError` for an unknown
    policy name or an empty agent list, or when a policy returns a name that is neither an
    agent nor the observer."""
    if not request.agents:
        raise RulesError("speaker selection needs at least one agent")
    chosen_policy = policy if callable(policy) else speaker_policies.get(policy)
    if chosen_policy is None:
        raise RulesError(f"unknown speaker policy {policy!r}; known: {', '.join(sorted(speaker_policies))}")
    name = chosen_policy(request, rng)
    if name not in request.agents and name != request.rules.observer:
        raise RulesError(f"speaker policy {policy!r} chose {name!r}, who is not in the dialogue")
    return name
