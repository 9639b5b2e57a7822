"""What one resonance query reads, handed to the `Resonator` part by part.

The Field's association part builds one `Sources` from its collaborators; the resonator and
its phases see only this, never the Field. The graph, the scorer and the code index are
callables: they open on first use, so a query with the phases that need them switched off
never loads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .memory_nodes import MemoryNodes

if TYPE_CHECKING:
    from ..graph.kg import KnowledgeGraph
    from ..recall.fusion import FusionConfig
    from ..store.durable import Store
    from ..store.state import State
    from .priming import SessionPrimer
    from .scoring import Scorer

__all__ = ["Sources"]


@dataclass(frozen=True)
class Sources:
    """The parts of a Field a resonance query reads."""

    store: Store
    fusion: FusionConfig
    primer: SessionPrimer
    # texts -> (unit vectors, ok mask), read-only (`FieldEmbedder.query`)
    embed: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]
    # semantic? -> (keyword index, vector index or None), without waiting for a writer
    indexes: Callable[[bool], tuple[Any, Any]]
    # (rows, now) -> each row's confidence decayed to now
    confidence: Callable[[np.ndarray, float], np.ndarray]
    graph: Callable[[], KnowledgeGraph]
    scorer: Callable[[], Scorer]
    code_index: Callable[[], Any]  # the field's code index, None if it has none
    # store row -> graph node, kept across queries (spreading reads every candidate's)
    nodes: MemoryNodes = field(default_factory=MemoryNodes)

    @property
    def state(self) -> State:
        """The store's in-memory state (rows, texts, vectors, flags)."""
        return self.store.state
