"""Numba kernels of hybrid recall's candidates (recall/hybrid.py) and of fusion's weighted
formula with the calibrated normalisation (recall/fusion.py): one call over the candidates
each instead of two dozen numpy calls over arrays of a few values; and full resonance's
relevance of its pool (`pool_relevance`) and the candidates forgotten since the indexes were
read (`drop_deleted`, in the store's flags); and the dense id maps' gather (`dense_values`).

The arithmetic is numpy's, operation for operation (no fused multiply-add: numba does not
contract without fastmath), so the values are the same bit for bit; NaN reads as numpy's
`minimum`/`maximum` read it (it propagates), a NaN cosine is 0. The exception is
`nearest_rows`, the vector index's exact scan, whose sums are reassociated to vectorise (an
approximate index's order of summation was never numpy's either).
"""

from __future__ import annotations

import numpy as np
from numba import boolean, float32, float64, int32, int64, njit, uint8, void

from .columns import FLAGS  # a store's flags column, read in place

__all__ = ["dense_values", "drop_deleted", "merge_candidates", "nearest_rows", "pool_relevance", "row_signals", "weighted_calibrated"]


@njit(void(float32[::1], float32[::1], float32[::1], float32[::1], float64, float64, float64,
           float64, float64[::1], float64[::1], float64[::1]), cache=True, error_model="numpy")
def weighted_calibrated(cosine: np.ndarray, hub: np.ndarray, bm25: np.ndarray,
                        coverage: np.ndarray, hub_penalty: float, floor: float,
                        semantic_weight: float, keyword_weight: float, sem: np.ndarray,
                        kw: np.ndarray, base: np.ndarray) -> None:  # pragma: no cover
    """Per candidate: ``sem = clip(cos − hub_penalty·hub, 0, 1)``, ``kw = bm25/max(bm25) ·
    (floor + (1 − floor)·clip(coverage, 0, 1))`` (0 when no candidate has a BM25 score) and
    ``base = semantic_weight·sem + keyword_weight·kw``."""
    n = cosine.shape[0]
    top = 0.0
    if n:
        top = -np.inf
        for i in range(n):
            b = float64(bm25[i])
            if b != b:  # numpy's max propagates NaN
                top = np.nan
                break
            if b > top:
                top = b
    for i in range(n):
        c = float64(cosine[i])
        c = 0.0 if c != c else c
        h = float64(hub[i])
        h = 0.0 if h != h else h
        s = c - hub_penalty * h
        if s == s:  # np.maximum(s, 0) then np.minimum(., 1); NaN stays NaN
            s = 0.0 if s < 0.0 else s
            s = 1.0 if s > 1.0 else s
        k = float64(bm25[i]) / top if top > 0 else 0.0
        v = float64(coverage[i])
        if v == v:
            v = 0.0 if v < 0.0 else v
            v = 1.0 if v > 1.0 else v
        k *= floor + (1.0 - floor) * v
        sem[i] = s
        kw[i] = k
        base[i] = semantic_weight * s + keyword_weight * k


@njit(int64(int64[::1], int64[::1], float32[::1], float32[::1], float32[::1], float32[::1],
            int64[::1], int32[::1], int32[::1], float32[::1], float32[::1]), cache=True)
def merge_candidates(semantic: np.ndarray, keyword: np.ndarray, keyword_scores: np.ndarray,
                     keyword_coverage: np.ndarray, semantic_scores: np.ndarray,
                     semantic_coverage: np.ndarray, ids: np.ndarray, semantic_rank: np.ndarray,
                     keyword_rank: np.ndarray, bm25: np.ndarray,
                     coverage: np.ndarray) -> int:  # pragma: no cover - compiled
    """The union of the semantic ids (in their order) and the keyword ids they lack (in
    theirs) into ``ids`` with their 1-based ranks (-1: not in that list), BM25 scores and
    coverage: a keyword hit's from the keyword list, a semantic id's from
    ``semantic_scores``/``semantic_coverage`` (the same scoring pass) when the keyword list
    lacks it. Returns how many; the out arrays hold at least both lists."""
    m = semantic.shape[0]
    order = np.argsort(semantic)  # a keyword id is looked for among the semantic ones
    ranked = semantic[order]
    for j in range(m):
        ids[j] = semantic[j]
        semantic_rank[j] = j + 1
        keyword_rank[j] = -1
        bm25[j] = semantic_scores[j]
        coverage[j] = semantic_coverage[j]
    n = m
    for r in range(keyword.shape[0]):
        doc = keyword[r]
        at = np.searchsorted(ranked, doc)
        if at < m and ranked[at] == doc:
            j = order[at]
        else:
            j = n
            ids[j] = doc
            semantic_rank[j] = -1
            n += 1
        keyword_rank[j] = r + 1
        bm25[j] = keyword_scores[r]
        coverage[j] = keyword_coverage[r]
    return n


@njit(boolean(float64[::1], float64[::1], float64, float64[::1]), cache=True)
def pool_relevance(hybrid: np.ndarray, activation: np.ndarray, weight: float,
                   out: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Full resonance's relevance ``(1 − weight)·hybrid + weight·activation`` per candidate
    into ``out`` (numpy's operations, in its order); whether every candidate is kept (a
    hybrid relevance < 0, or NaN, marks one forgotten)."""
    kept = True
    rest = 1.0 - weight
    for i in range(hybrid.shape[0]):
        h = hybrid[i]
        if not h >= 0.0:
            kept = False
        out[i] = rest * h + weight * activation[i]
    return kept


@njit(void(FLAGS, int64[::1], int64, float64[::1]), cache=True)
def drop_deleted(flags: bytearray, rows: np.ndarray, deleted: int,
                 score: np.ndarray) -> None:  # pragma: no cover - compiled
    """``score[i] = -1`` where row ``rows[i]`` has the flag ``deleted`` in ``flags`` (a
    memory forgotten since the indexes were read; a row past the flags reads as one)."""
    n = len(flags)
    for i in range(rows.shape[0]):
        r = rows[i]
        if r < 0 or r >= n or flags[r] & deleted:
            score[i] = -1.0


@njit(boolean(int64[::1], int64[::1], int64[::1]), cache=True)
def dense_values(values: np.ndarray, ids: np.ndarray,
                 out: np.ndarray) -> bool:  # pragma: no cover - compiled
    """``out[i] = values[ids[i]]`` (`recall.postings.DenseIds`, the candidates' slots and
    rows); False, ``out`` unfinished, as soon as an id is outside ``values``."""
    n = values.shape[0]
    for i in range(ids.shape[0]):
        d = ids[i]
        if d < 0 or d >= n:
            return False
        out[i] = values[d]
    return True


@njit(inline="always")
def _nearer(sa, ia, sb, ib):  # pragma: no cover - compiled
    # more similar first; equal similarities by id, the smaller first
    return sa > sb or (sa == sb and ia < ib)


@njit(inline="always")
def _sift_down(sims, ids, size, s, i):  # pragma: no cover - compiled
    """Put (s, i) at the root of the heap sims/ids[:size] (root: the least near kept) and
    sift it down to its place."""
    j = 0
    while True:
        child = 2 * j + 1
        if child >= size:
            break
        if child + 1 < size and _nearer(sims[child], ids[child], sims[child + 1],
                                        ids[child + 1]):
            child += 1
        if not _nearer(s, i, sims[child], ids[child]):
            break
        sims[j] = sims[child]
        ids[j] = ids[child]
        j = child
    sims[j] = s
    ids[j] = i


# fastmath's reassociation only: the dot product's sum vectorises (float32 lanes, as hnswlib's
# own SIMD distance does); NaN and inf keep their meaning
@njit(int64(float32[:, ::1], uint8[::1], float32[::1], int64, int64[::1], int64, int64[::1],
            float32[::1]), cache=True, fastmath={"reassoc", "contract"})
def nearest_rows(vectors: np.ndarray, alive: np.ndarray, unit: np.ndarray, n: int,
                 row_ids: np.ndarray, k: int, out_ids: np.ndarray,
                 out_sims: np.ndarray) -> int:  # pragma: no cover
    """The vector index's exact scan: the dot product of `unit` with each of the first `n`
    rows of `vectors` whose ``alive`` is set (unit rows: their cosine), and the `k` largest,
    equal ones by their id (``row_ids``), into ``out_ids`` and ``out_sims`` (clipped to
    [-1, 1]) most similar first; returns how many (at most the live rows). One pass over the
    rows in a single thread, a heap of the k best beside it: no array of every row's cosine,
    no partition or sort of it afterwards."""
    dim = vectors.shape[1]
    m = 0
    if k <= 0:
        return 0
    for r in range(n):
        if not alive[r]:
            continue
        s = float32(0.0)
        for j in range(dim):
            s += vectors[r, j] * unit[j]
        i = row_ids[r]
        if m < k:  # sift up
            j = m
            m += 1
            while j > 0:
                parent = (j - 1) >> 1
                if not _nearer(out_sims[parent], out_ids[parent], s, i):
                    break
                out_sims[j] = out_sims[parent]
                out_ids[j] = out_ids[parent]
                j = parent
            out_sims[j] = s
            out_ids[j] = i
        elif _nearer(s, i, out_sims[0], out_ids[0]):
            _sift_down(out_sims, out_ids, m, s, i)
    end = m - 1  # heap-sort in place: the least near to the end, in turn
    while end > 0:
        s, i = out_sims[end], out_ids[end]
        out_sims[end], out_ids[end] = out_sims[0], out_ids[0]
        _sift_down(out_sims, out_ids, end, s, i)
        end -= 1
    for j in range(m):  # numpy's maximum/minimum: NaN stays NaN
        s = out_sims[j]
        out_sims[j] = float32(1.0) if s > 1.0 else (float32(-1.0) if s < -1.0 else s)
    return m


@njit(void(float32[:, ::1], int64[::1], float32[::1], float32[::1], float32[::1], float32[::1]),
      cache=True, fastmath={"reassoc", "contract"})
def row_signals(vectors: np.ndarray, rows: np.ndarray, unit: np.ndarray, centroid: np.ndarray,
                cosine: np.ndarray, hub: np.ndarray) -> None:  # pragma: no cover
    """Per listed row: its dot product with `unit` (the query) and with `centroid`, read in
    one pass over the row, where the gather and matrix product read it twice over (a copy of
    the rows first); NaN for a row of -1 (an id not in the index)."""
    dim = vectors.shape[1]
    for k in range(rows.shape[0]):
        r = rows[k]
        if r < 0:
            cosine[k] = np.nan
            hub[k] = np.nan
            continue
        s = float32(0.0)
        h = float32(0.0)
        for j in range(dim):
            v = vectors[r, j]
            s += v * unit[j]
            h += v * centroid[j]
        cosine[k] = s
        hub[k] = h

