"""A Field's embedder: the one given, or the default loaded the first time a text needs it.

Every vector a Field stores or searches with is a unit row (`unit_rows`); an embedder's
failure on a text is a zero row with ``ok`` False, stored as a fallback to re-embed later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..store.durable import Store

__all__ = ["FieldEmbedder", "unit_rows"]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class FieldEmbedder:
    """Embeds texts for one Field (``embedder``: any object with ``dim`` and ``embed(texts)``;
    None loads ``Embedder.default()`` on first use, so a field only written with given
    vectors never loads a model)."""

    def __init__(self, store: Store, embedder: Any = None) -> None:
        self._store = store  # its dimension shapes the answer for no texts
        self._embedder = embedder

    @property
    def embedder(self) -> Any:
        """The embedder, loading the default one on first use."""
        if self._embedder is None:
            from ..recall.embedder import Embedder

            self._embedder = Embedder.default()
        return self._embedder

    @property
    def loaded(self) -> Any:
        """The embedder if it is given or loaded already, else None (loads nothing)."""
        return self._embedder

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(unit vectors (n, dim) float32, ok mask): rows not ok are zero fallbacks."""
        if not texts:
            return np.zeros((0, self._store.state.dim or 0), np.float32), np.zeros(0, bool)
        out = self.embedder.embed(list(texts))
        vectors = np.asarray(getattr(out, "vectors", out), dtype=np.float32)
        ok = getattr(out, "ok", None)
        ok = np.linalg.norm(vectors, axis=1) > 0 if ok is None else np.asarray(ok, bool)
        return unit_rows(vectors), ok
