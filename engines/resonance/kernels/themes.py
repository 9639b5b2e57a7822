"""Numba kernel of the theme index (`resonance.themes`): sequential theme assignment.

Assignment is order-dependent (a theme's size, hence its sparsity bonus, changes with every
member), so rows are taken one by one — in a kernel, not a Python loop. The cosine of each
row with the centroids as they were at the start of a chunk comes in precomputed (one BLAS
product per chunk); themes created inside the chunk are compared exactly here.
"""

from __future__ import annotations

import numpy as np
from numba import float32, float64, int64, njit, uint8

__all__ = ["assign_sequential", "sparsity"]


@njit(float64(float64, float64), cache=True, nogil=True)
def sparsity(size, ideal):  # pragma: no cover - compiled
    """The seed's sparsity term 1 / (1 + exp(2·(size/ideal − 1))): 0.88 for an empty
    theme, 0.5 at the ideal size, 0.12 at twice it — big themes stop attracting members."""
    return 1.0 / (1.0 + np.exp(2.0 * (size / ideal - 1.0)))


@njit(
    int64(
        float32[:, ::1], float32[:, ::1], int64,  # sims (m, t0), vectors (m, dim), t0
        float64[:, ::1], int64[::1], uint8[::1], int64,  # sums, sizes, alive, n_themes
        float64, float64, float64, float64,  # semantic w, sparsity w, ideal size, threshold
        int64[::1],  # out: theme per row
    ),
    cache=True, nogil=True,
)
def assign_sequential(sims, vectors, t0, sums, sizes, alive, n_themes, w_sem, w_sparse,
                      ideal, threshold, out):  # pragma: no cover - compiled
    """Assign each row to the live theme of highest w_sem·cos + w_sparse·sparsity(size),
    or to a new theme when that best score is below `threshold`; updates sums/sizes/alive
    in place and returns the new number of themes (the caller sized the arrays for
    n_themes + m)."""
    dim = vectors.shape[1]
    for i in range(vectors.shape[0]):
        best = -1e30
        best_t = -1
        for t in range(t0):
            if alive[t] == 0:
                continue
            s = w_sem * sims[i, t] + w_sparse * sparsity(np.float64(sizes[t]), ideal)
            if s > best:
                best = s
                best_t = t
        for t in range(t0, n_themes):  # themes born in this chunk: exact cosine
            if alive[t] == 0:
                continue
            dot = 0.0
            nrm = 0.0
            for d in range(dim):
                dot += sums[t, d] * vectors[i, d]
                nrm += sums[t, d] * sums[t, d]
            cos = dot / max(np.sqrt(nrm), 1e-12)
            s = w_sem * cos + w_sparse * sparsity(np.float64(sizes[t]), ideal)
            if s > best:
                best = s
                best_t = t
        if best_t < 0 or best < threshold:
            best_t = n_themes
            n_themes += 1
            alive[best_t] = 1
            sizes[best_t] = 0
            for d in range(dim):
                sums[best_t, d] = 0.0
        for d in range(dim):
            sums[best_t, d] += vectors[i, d]
        sizes[best_t] += 1
        out[i] = best_t
    return n_themes
