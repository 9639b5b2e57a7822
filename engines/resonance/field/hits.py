"""What recall and resonance return: `Hit`, built from a store row or a code symbol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..memory import Kind

if TYPE_CHECKING:
    from ..store.state import State

__all__ = ["Hit", "memory_hit", "symbol_hit"]


@dataclass(frozen=True)
class Hit:
    """One recalled memory with its score and the per-signal components behind it."""

    id: str
    text: str
    score: float
    kind: str
    tags: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    components: dict[str, Any] = field(default_factory=dict)


_LABELS = {int(k): k.label for k in Kind}  # a kind's code -> its label


def memory_hit(state: State, row: int, score: float, components: dict[str, Any]) -> Hit:
    """The hit for the memory stored at ``row``."""
    code = state.kind[row]
    label = _LABELS.get(code) or Kind(code).label  # an unknown code: Kind's own error
    return Hit(state.ids[row], state.text[row], score, label, state.tags_at(row),
               state.meta_at(row), components)


def symbol_hit(memory_id: str, symbol: Any, score: float, components: dict[str, Any]) -> Hit:
    """The hit for a code symbol (a `code.symbols.Symbol`) that resonance surfaced."""
    return Hit(memory_id, f"{symbol.kind} {symbol.qualified} ({symbol.file}:"
               f"{symbol.start_line}) {symbol.signature}", score, "symbol", (),
               {"symbol": symbol.qualified, "file": symbol.file, "line": symbol.start_line},
               components)
