"""Seed strategies: the instruction each turn answers (Entelgia's seven, or a static seed).

Strategies are functions `(SeedRequest, random.Random) -> Seed` in the registry
`seed_strategies`; `register_seed_strategy` adds one by name.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import RulesError
from .turns import Turn

__all__ = [
    "SEED_STRATEGIES",
    "STATIC_SEED",
    "STRATEGY_INSTRUCTIONS",
    "STRATEGY_WEIGHTS",
    "Seed",
    "SeedRequest",
    "SeedStrategy",
    "choose_seed",
    "choose_strategy",
    "register_seed_strategy",
    "seed_strategies",
]

SEED_STRATEGIES: tuple[str, ...] = (
    "agree_and_expand", "question_assumption", "synthesize", "constructive_disagree",
    "explore_implication", "introduce_analogy", "meta_reflect",
)
"""The seven strategies, in the order their weights are listed."""

STRATEGY_WEIGHTS: tuple[float, ...] = (0.15, 0.20, 0.10, 0.25, 0.15, 0.10, 0.05)
"""The weighted-random fallback's weights, one per entry of `SEED_STRATEGIES`."""

STRATEGY_INSTRUCTIONS: dict[str, str] = {
    "agree_and_expand": "Build on the previous point: accept what holds and add a new dimension or more depth.",
    "question_assumption": "Question a hidden assumption in what was just said: what are we taking for granted?",
    "synthesize": "Bring the different views together: name the thread that connects them.",
    "constructive_disagree": "Disagree constructively: offer a concrete alternative perspective and say why.",
    "explore_implication": "Explore the consequences: where does this line of thinking lead if it is true?",
    "introduce_analogy": "Connect through an analogy: what is this like, and what does the comparison reveal?",
    "meta_reflect": "Reflect on the dialogue itself: what have we learned so far, and where are we stuck?",
}
"""Each strategy's instruction (the seed's text follows "TOPIC: <topic>")."""

STATIC_SEED = "Respond to the last point and move the dialogue forward."
"""The legacy mode's one instruction."""

_CALMING_EMOTIONS = frozenset({"anger", "frustration"})


@dataclass(frozen=True)
class SeedRequest:
    """What a strategy sees: the topic, the history so far, the speaker, the number of the
    turn being written (1-based), the speaker's conflict index, and the last emotion (None:
    read from the last turn of `history` that carries one — Fixy's turns carry none)."""

    topic: str
    history: tuple[Turn, ...]
    speaker: str
    turn: int
    conflict: float = 0.0
    last_emotion: str | None = None


@dataclass(frozen=True)
class Seed:
    """A chosen seed: the strategy's name and the full instruction text for the prompt."""

    strategy: str
    instruction: str

    def to_dict(self) -> dict[str, str]:
        return {"strategy": self.strategy, "instruction": self.instruction}


SeedStrategy = Callable[[SeedRequest, random.Random], Seed]


def choose_strategy(history: Sequence[Turn], turn: int, conflict: float, last_emotion: str | None,
                    rng: random.Random) -> str:
    """The reference's rules, first match wins: no turns yet → constructive_disagree;
    turn % 7 == 0 → meta_reflect; conflict > 8 → synthesize; last emotion anger or
    frustration → agree_and_expand; else one weighted draw (`rng.choices`) with
    `STRATEGY_WEIGHTS`. Only the last rule draws from `rng`."""
    if not history:
        return "constructive_disagree"
    if turn > 0 and turn % 7 == 0:
        return "meta_reflect"
    if conflict > 8.0:
        return "synthesize"
    if last_emotion is not None and last_emotion.lower() in _CALMING_EMOTIONS:
        return "agree_and_expand"
    return rng.choices(SEED_STRATEGIES, weights=STRATEGY_WEIGHTS)[0]


def _seed_text(topic: str, instruction: str) -> str:
    return f"TOPIC: {topic}\n{instruction}" if topic else instruction


def _entelgia(request: SeedRequest, rng: random.Random) -> Seed:
    emotion = request.last_emotion
    if emotion is None:  # the last turn that carries one (the observer's turns carry none)
        emotion = next((t.emotion for t in reversed(request.history) if t.emotion is not None), None)
    name = choose_strategy(request.history, request.turn, request.conflict, emotion, rng)
    return Seed(name, _seed_text(request.topic, STRATEGY_INSTRUCTIONS[name]))


def _static(request: SeedRequest, rng: random.Random) -> Seed:
    return Seed("static", _seed_text(request.topic, STATIC_SEED))


seed_strategies: dict[str, SeedStrategy] = {"entelgia": _entelgia, "static": _static}
"""The seed strategies by name; add your own with `register_seed_strategy`."""


def register_seed_strategy(name: str, strategy: SeedStrategy) -> None:
    """Make `strategy` selectable as `name` (replacing one of that name)."""
    if not isinstance(name, str) or not name:
        raise RulesError("a seed strategy needs a non-empty name")
    if not callable(strategy):
        raise RulesError(f"seed strategy {name!r} must be callable (request, rng) -> Seed")
    seed_strategies[name] = strategy


def choose_seed(request: SeedRequest, rng: random.Random, strategy: str | SeedStrategy = "entelgia") -> Seed:
    """The seed for this turn by the named (or given) strategy; `RulesError` for an unknown name."""
    chosen = strategy if callable(strategy) else seed_strategies.get(strategy)
    if chosen is None:
        raise RulesError(f"unknown seed strategy {strategy!r}; known: {', '.join(sorted(seed_strategies))}")
    return chosen(request, rng)
