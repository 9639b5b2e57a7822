"""Hybrid recall: candidates from the vector and keyword indexes, every signal exact, fused.

    query ─► BM25Index.search(top depth, + the semantic ids) ─┐
    vector ─► VectorIndex.search(top depth) ──────────────────┴─► union ─► signals(cos, hub)
                                                                  ─► fusion.fuse ─► top k

The Field calls `HybridSearcher.search(query, vector, k, mode=...)` with its own callables
for tags and confidence (looked up only for the ≤ 2·depth candidates, never for the field).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ConfigError
from .fusion import Candidates, FusedHit, FusionConfig, fuse, rank_single

if TYPE_CHECKING:  # only for hints: importing bm25 compiles/loads the numba kernels
    from .bm25 import BM25Index
    from .index import VectorIndex

__all__ = ["HybridSearcher", "Mode"]

Mode = Literal["hybrid", "semantic", "keyword"]
_DEFAULT_FUSION = FusionConfig()  # frozen: one for every searcher built without a config
IdsToValues = Callable[[np.ndarray], np.ndarray]
KeywordMore = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


_MERGE: Any = None


def _merge() -> Any:
    """kernels/fusion.py's `merge_candidates`, imported on first use."""
    global _MERGE
    if _MERGE is None:
        from ..kernels.fusion import merge_candidates as _MERGE
    return _MERGE


class HybridSearcher:
    """Recall over one BM25Index and one VectorIndex that share the caller's int ids."""

    def __init__(
        self, keyword: BM25Index, vectors: VectorIndex | None,
        config: FusionConfig | None = None,
    ) -> None:
        self.keyword = keyword
        self.vectors = vectors
        self.config = config or _DEFAULT_FUSION

    def candidates(
        self, query: str, vector: np.ndarray | None, mode: Mode = "hybrid", depth: int = 100,
    ) -> Candidates:
        """The candidate set of a mode with its signals (see fusion.Candidates)."""
        return self.candidates_keeping(query, vector, mode, depth)[0]

    def candidates_keeping(
        self, query: str, vector: np.ndarray | None, mode: Mode = "hybrid", depth: int = 100,
    ) -> tuple[Candidates, KeywordMore | None]:
        """`candidates`, plus the keyword pass's scorer of further ids (BM25 score and
        coverage; None without a keyword pass) — full resonance scores the memories that
        join by association with it instead of searching again."""
        more = None
        use_sem = bool(
            mode in ("hybrid", "semantic") and vector is not None and self.vectors is not None
            and len(self.vectors)
        )
        use_kw = mode in ("hybrid", "keyword")
        sem_ids = np.zeros(0, np.int64)
        if use_sem:
            sem_ids, _ = self.vectors.search(vector, depth)
        if use_kw:  # the union of both lists with their signals, one kernel call
            kw, more = self.keyword.search_keeping(query, depth, sem_ids)
            size = sem_ids.shape[0] + kw.ids.shape[0]
            ids, srank, krank = (np.empty(size, np.int64), np.empty(size, np.int32),
                                 np.empty(size, np.int32))
            bm25, coverage = np.empty(size, np.float32), np.empty(size, np.float32)
            n = _merge()(sem_ids, kw.ids, kw.scores, kw.coverage, kw.extra_scores,
                         kw.extra_coverage, ids, srank, krank, bm25, coverage)
            ids, srank, krank, bm25, coverage = (a[:n] for a in (ids, srank, krank, bm25,
                                                                  coverage))
        else:
            ids = sem_ids
            n = ids.shape[0]
            srank = np.arange(1, n + 1, dtype=np.int32)
            krank = np.full(n, -1, np.int32)
            bm25 = np.zeros(n, np.float32)
            coverage = np.zeros(n, np.float32)
        if use_sem:
            cos, hub = self.vectors.signals(vector, ids)
        else:
            cos = np.full(n, np.nan, np.float32)
            hub = np.full(n, np.nan, np.float32)
        return Candidates(ids, cos, hub, bm25, coverage, srank, krank), more

    def search(
        self, query: str, vector: np.ndarray | None, k: int = 10, *, mode: Mode = "hybrid",
        tag_of: IdsToValues | None = None, confidence_of: IdsToValues | None = None,
        allow: IdsToValues | None = None,
    ) -> list[FusedHit]:
        """The k best hits of `mode`.

        tag_of(ids) → share of the requested tags each carries; confidence_of(ids) → 0..1;
        allow(ids) → bool mask (filters, e.g. by realm) applied before ranking. In
        "semantic"/"keyword" modes the score is the raw cosine / BM25; "hybrid" fuses.
        A missing `vector` (embedder down) degrades hybrid to the keyword signals.
        """
        if mode not in ("hybrid", "semantic", "keyword"):
            raise ConfigError(f"recall mode must be hybrid, semantic or keyword, not {mode!r}")
        depth = max(self.config.depth, int(k))
        cands = self.candidates(query, vector, mode, depth)
        if allow is not None and len(cands):
            keep = np.asarray(allow(cands.ids), dtype=bool)
            cands = Candidates(*(getattr(cands, f)[keep] for f in (
                "ids", "cosine", "hub", "bm25", "coverage", "semantic_rank", "keyword_rank")))
        if mode != "hybrid":
            return rank_single(cands, k, mode)
        tags = tag_of(cands.ids) if tag_of is not None and len(cands) else None
        conf = confidence_of(cands.ids) if confidence_of is not None and len(cands) else None
        return fuse(cands, k, self.config, tag=tags, confidence=conf)
