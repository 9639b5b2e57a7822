"""Session context in a memory's vector: each memory is embedded with the one before it.

A short turn ("Yes, last Tuesday!") means little alone; its meaning lives in the turn before
it. So a memory remembered in a session chain — the chain of `follows` edges (same
``session``, at most ``contiguity`` seconds after the previous new memory, see
`FieldConfig.contiguity`) — is stored with the vector

    v_i = unit(e(text_i) + w · v_{i-1})

where ``e`` is the embedder, ``w`` is ``FieldConfig.context_weight`` and ``v_{i-1}`` is the
stored vector of the memory before it in the chain: a decaying sum over the session so far
(weights 1, w, w², … before normalisation). It costs no second embedding pass, and the stored
text, the keyword index and the query side stay exactly as they were. Measured on LoCoMo dev
(docs/memory.md, "Session context"): semantic recall@10 .447 → .528 with w = 0.5.

What is mixed and what is not: a text the embedder failed on (a zero fallback) is stored as
such and the chain goes on from the vector before it (a later call, finding it the
session's last memory, starts a fresh chain); an ``embedding`` the caller gives is
stored as given (never mixed) and the chain goes on from it. Within a batch the chain runs
over every gate-approved item in order, near-duplicates that merge included, so it can differ
from the `follows` chain (which links new memories only) where a merge happens; a merge by
vector also needs the texts' own vectors to agree (field/ingest.py). Re-embedding
(`reembed_field`, `soul memory reembed`, `reembed_pending`) replays the chain along the
graph's `follows` edges, each memory mixed with the new vector of the one before it
(field/replay.py, which lists what that replay cannot know: given vectors, merges inside a
batch, failed embeddings, forgotten predecessors).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ContextChain", "with_context"]


def with_context(own: np.ndarray, context: np.ndarray, weight: float) -> np.ndarray:
    """``unit(own + weight · context)``: a memory's unit vector carrying the one before it
    (``own`` back unchanged when the sum is zero)."""
    mixed = own + float(weight) * np.asarray(context, np.float32)
    norm = float(np.linalg.norm(mixed))
    return mixed / norm if norm > 0 else own


class ContextChain:
    """The running context of one remember call: ``weight`` and the vector of the memory
    before the next item (None: the next item starts a chain and is stored unmixed)."""

    __slots__ = ("vector", "weight")

    def __init__(self, weight: float, vector: np.ndarray | None = None) -> None:
        self.weight = float(weight)
        self.vector = None if vector is None or not np.any(vector) else \
            np.asarray(vector, np.float32).copy()

    def mix(self, vectors: np.ndarray, ok: np.ndarray, embedded: np.ndarray) -> np.ndarray:
        """The stored vectors of a batch, in order: rows the embedder made (``embedded``
        and ``ok``) mixed with the chain's vector; each row with a real vector becomes the
        context of the next. ``vectors`` are unit rows; the result is unit rows."""
        if not np.any(embedded & ok):  # nothing to mix (given vectors): only move the chain on
            good = np.flatnonzero(ok)
            if len(good):
                self.vector = np.array(vectors[good[-1]], dtype=np.float32)
            return vectors
        out = np.array(vectors, dtype=np.float32, copy=True)
        for j in range(len(out)):
            if not ok[j]:
                continue
            if embedded[j] and self.vector is not None:
                out[j] = with_context(out[j], self.vector, self.weight)
            self.vector = out[j].copy()
        return out
