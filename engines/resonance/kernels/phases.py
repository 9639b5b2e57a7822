"""Numba kernels of full resonance's association phases (resonate/phases.py): one call a
phase over the candidate pool instead of a dozen numpy calls over a few hundred values, with
numpy's arithmetic, operation for operation (no fused multiply-add: numba does not contract
without fastmath), so the scores are the same bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import float32, float64, int64, njit

__all__ = ["boost_members", "inhibition", "live_rows", "top_order"]

from .columns import FLAGS  # a store's flags column, read in place


@njit(int64(int64[::1], FLAGS, int64, int64[::1]), cache=True)
def live_rows(rows: np.ndarray, flags: bytearray, deleted: int,
              out: np.ndarray) -> int:  # pragma: no cover - compiled
    """The positions of ``rows`` that are store rows (not -1) without the flag ``deleted``
    in ``flags``, in order, into ``out``; how many."""
    n = len(flags)
    m = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        if 0 <= r < n and not flags[r] & deleted:
            out[m] = i
            m += 1
    return m


@njit(int64(float32[:, ::1], float32, float64, int64, float64[::1]), cache=True)
def inhibition(sims: np.ndarray, threshold: float, strength: float, most: int,
               mult: np.ndarray) -> int:  # pragma: no cover - compiled
    """Full resonance's lateral inhibition over its window: for each pair i < j with
    ``sims[i, j] > threshold`` (float32), in row order, while winner i has damped fewer than
    ``most``: ``mult[j] *= 1 − strength·sims[i, j]`` (float64). Returns how many damped."""
    n = sims.shape[0]
    damped = 0
    for i in range(n):
        taken = 0
        for j in range(i + 1, n):
            if taken >= most:
                break
            s = sims[i, j]
            if s > threshold:
                taken += 1
                mult[j] *= 1.0 - strength * float64(s)
                damped += 1
    return damped


@njit(int64(int64[::1], int64[::1], float64, float64[::1], float64, float64[::1],
            float64[::1]), cache=True)
def boost_members(rows: np.ndarray, members: np.ndarray, boost: float, shares: np.ndarray,
                  share_boost: float, score: np.ndarray,
                  factor: np.ndarray) -> int:  # pragma: no cover - compiled
    """A phase's factor per pool row into ``factor``, and ``score`` times it: ``boost`` for a
    row among ``members`` (sorted), else 1, times ``1 + share_boost · shares[i]`` when
    ``shares`` is given (one per row; empty: none) — session priming's recent memories and
    active topics, the attractor basin's memories. Returns how many rows it boosts (factor
    > 1 with shares; else the members if boost > 1)."""
    topics = shares.shape[0] > 0
    boosted = 0
    for i in range(rows.shape[0]):
        at = np.searchsorted(members, rows[i])
        primed = at < members.shape[0] and members[at] == rows[i]
        f = boost if primed else 1.0
        if topics:
            f = f * (1.0 + share_boost * shares[i])
            if f > 1.0:
                boosted += 1
        elif primed and boost > 1.0:
            boosted += 1
        factor[i] = f
        score[i] *= f
    return boosted


@njit(inline="always")
def _before(si, i, sj, j):  # pragma: no cover - compiled
    # numpy's stable argsort of -score: the larger score first, NaN last, equal ones by position
    if si != si:
        return sj != sj and i < j
    if sj != sj:
        return True
    return si > sj or (si == sj and i < j)


@njit(inline="always")
def _sift_down(score, heap, size, i):  # pragma: no cover - compiled
    """Put position i at the root of the heap heap[:size] (root: the last in order kept) and
    sift it down to its place."""
    s = score[i]
    j = 0
    while True:
        child = 2 * j + 1
        if child >= size:
            break
        c = heap[child]
        if child + 1 < size and _before(score[c], c, score[heap[child + 1]], heap[child + 1]):
            child += 1
            c = heap[child]
        if not _before(s, i, score[c], c):
            break
        heap[j] = c
        j = child
    heap[j] = i


@njit(int64(float64[::1], int64, int64[::1]), cache=True)
def top_order(score: np.ndarray, m: int, out: np.ndarray) -> int:  # pragma: no cover - compiled
    """The first ``m`` positions of ``score`` in numpy's stable argsort of −score (largest
    first, equal ones by position, NaN last) into ``out``; how many (at most len(score)):
    a heap of m beside one pass, not a sort of every candidate when only the top are read."""
    n = 0
    if m <= 0:
        return 0
    for i in range(score.shape[0]):
        if n < m:  # sift up
            j = n
            n += 1
            while j > 0:
                parent = (j - 1) >> 1
                p = out[parent]
                if not _before(score[p], p, score[i], i):
                    break
                out[j] = p
                j = parent
            out[j] = i
        elif _before(score[i], i, score[out[0]], out[0]):
            _sift_down(score, out, n, i)
    end = n - 1  # heap-sort in place: the last in order to the end, in turn
    while end > 0:
        i = out[end]
        out[end] = out[0]
        _sift_down(score, out, end, i)
        end -= 1
    return n
