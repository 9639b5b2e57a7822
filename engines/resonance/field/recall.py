"""Hybrid recall over a Field's store: the query embedded, the indexes caught up, fused.

`Field.recall` checks the field is open and queues the hits' accesses; the search itself is
here. Fusion (`recall.hybrid.HybridSearcher`) gets three callbacks over the store's state:
each candidate's tag overlap (the boost of ``tags``), its decayed confidence, and whether it
is still alive (forgotten rows stay in the indexes until they catch up).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..errors import ConfigError
from .confidence import decayed_confidence
from .hits import Hit, memory_hit

if TYPE_CHECKING:
    from ..recall.fusion import FusionConfig
    from ..store.state import State
    from .indexes import FieldIndexes

__all__ = ["Mode", "hybrid_recall"]

log = logging.getLogger("soul.engines.resonance")

Mode = Literal["hybrid", "semantic", "keyword"]
Embed = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


def hybrid_recall(state: State, indexes: FieldIndexes, fusion: FusionConfig, embed: Embed,
                  query: str, k: int, mode: Mode, tags: Iterable[str] | None) -> list[Hit]:
    """The ``k`` memories most relevant to ``query``, best first (see `Field.recall`); a
    query whose embedding fails falls back to keywords."""
    from ..recall.hybrid import HybridSearcher

    if mode not in ("hybrid", "semantic", "keyword"):
        raise ConfigError(f"recall mode must be hybrid, semantic or keyword, not {mode!r}")
    if k <= 0 or len(state) == 0:
        return []
    vector = None
    if mode != "keyword":
        vectors, ok = embed([query])
        vector = vectors[0] if ok[0] else None
        if vector is None:
            log.warning("query embedding failed: recall falls back to keywords")
    kindex, vindex = indexes.caught_up(vector is not None)
    searcher = HybridSearcher(kindex, vindex, fusion)
    wanted = frozenset(tags or ())
    now = time.time()

    def tag_of(ids: np.ndarray) -> np.ndarray:
        if not wanted:
            return np.zeros(len(ids), np.float32)
        return np.array([len(wanted.intersection(state.tags_at(i))) / len(wanted) for i in ids],
                        np.float32)

    def confidence_of(ids: np.ndarray) -> np.ndarray:
        return decayed_confidence(state, ids, now)

    def allow(ids: np.ndarray) -> np.ndarray:
        return np.array([state.is_alive(i) for i in ids], bool)

    fused = searcher.search(query, vector, k, mode=mode, tag_of=tag_of,
                            confidence_of=confidence_of, allow=allow)
    return [memory_hit(state, h.id, float(h.score), h.components.as_dict()) for h in fused]
