"""What attention rests on, as values: `Weighted` names, the `Focus` a context carries, and
copies of the attention maps; with the ranking rules Dhyana uses to build them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Any, NamedTuple

__all__ = [
    "AttentionWeights",
    "Focus",
    "Ranking",
    "Weighted",
    "focus_order",
    "make_focus",
    "ranked",
    "weighted",
]


class Weighted(NamedTuple):
    """A name with its weight (a concept's focus or a tool's attention)."""

    name: str
    weight: float


# Builds a Weighted from a (name, weight) pair in C, skipping NamedTuple's Python __new__.
weighted = partial(tuple.__new__, Weighted)


class Ranking(tuple[Weighted, ...]):
    """Weighted names, highest first: a tuple that also answers by name, so
    `"auth" in ranking` and `ranking["auth"]` (its weight) work as on a dict."""

    __slots__ = ()

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return any(entry[0] == item for entry in self)
        return tuple.__contains__(self, item)

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            for name, weight in self:
                if name == key:
                    return weight
            raise KeyError(key)
        return tuple.__getitem__(self, key)

    @property
    def names(self) -> tuple[str, ...]:
        """The names, highest weight first."""
        return tuple(entry[0] for entry in self)

    def as_dict(self) -> dict[str, float]:
        """{name: weight}, highest first."""
        return dict(self)


EMPTY_RANKING = Ranking()  # immutable, so one instance serves every default


class AttentionWeights(NamedTuple):
    """Copies of the three attention maps."""

    messages: dict[str, float]
    concepts: dict[str, float]
    tools: dict[str, float]


@dataclass(frozen=True, slots=True)
class Focus:
    """What attention rests on: the top concepts and tools (highest first) and the ids of
    the most salient messages. `"auth" in focus` asks whether a concept is in focus."""

    concepts: Ranking = EMPTY_RANKING
    tools: Ranking = EMPTY_RANKING
    # (message ids, their saliences, K) at the time of the snapshot: the window is ranked
    # only if someone reads `messages`, which most turns nobody does.
    _window: tuple[tuple[str, ...], tuple[float, ...], int] = field(
        default=((), (), 0), repr=False, compare=False
    )

    @property
    def messages(self) -> tuple[str, ...]:
        """Ids of the K most salient messages, highest first (ties: older first)."""
        ids, saliences, k = self._window
        return tuple(ids[i] for i in focus_order(saliences)[:k])

    @property
    def names(self) -> tuple[str, ...]:
        """The focused concepts' names, highest weight first."""
        return self.concepts.names

    def __contains__(self, concept: object) -> bool:
        return concept in self.concepts

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.concepts)

    def __str__(self) -> str:
        return ", ".join(f"{name} ({weight:.2f})" for name, weight in self.concepts)


_new = object.__new__
_SET_CONCEPTS = Focus.__dict__["concepts"].__set__
_SET_TOOLS = Focus.__dict__["tools"].__set__
_SET_WINDOW = Focus.__dict__["_window"].__set__


def make_focus(
    concepts: Ranking, tools: Ranking, window: tuple[tuple[str, ...], tuple[float, ...], int]
) -> Focus:
    """Focus(concepts, tools, window) without the frozen dataclass __init__, which sets each
    field through object.__setattr__ (a Focus is built every turn its context is read)."""
    focus = _new(Focus)
    _SET_CONCEPTS(focus, concepts)
    _SET_TOOLS(focus, tools)
    _SET_WINDOW(focus, window)
    return focus


def focus_order(saliences: list[float] | tuple[float, ...]) -> list[int]:
    """Indices by salience, highest first; the stable sort keeps older messages first on
    ties."""
    return sorted(range(len(saliences)), key=saliences.__getitem__, reverse=True)


def ranked(weights: dict[str, float], n: int | None = None) -> list[tuple[str, float]]:
    """The n (default all) heaviest (name, weight) pairs, highest first; sorted() is stable,
    so ties keep insertion (first-mention) order."""
    return sorted(weights.items(), key=itemgetter(1), reverse=True)[:n]
