"""Embedding helpers: the embedder type the drift/collapse rules take, and cosine similarity
in pure Python (no numpy needed: vectors are short and few)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["Embedder", "cosine", "embed"]

Embedder = Callable[[Sequence[str]], list[list[float]]]
"""Texts in, one vector per text out (the runtime passes the resonance engine's embedder)."""

EMBED_CHARS = 2000  # each text is cut to this many characters before embedding: bounded cost


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zeros or lengths differ."""
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def embed(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """`embedder` over `texts` cut to `EMBED_CHARS` each, checked to return one vector per text."""
    vectors = embedder([t[:EMBED_CHARS] for t in texts])
    if len(vectors) != len(texts):
        raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
    return [list(map(float, v)) for v in vectors]
