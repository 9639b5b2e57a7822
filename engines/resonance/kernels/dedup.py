"""Numba kernels of the near-duplicate index (`resonance.dedup`): LSH chains and best match.

Each of L tables maps a b-bit sign code to a chain of rows: ``heads[t, code]`` is the last
row inserted with that code, ``nxt[t, row]`` the row before it (-1 ends a chain).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["lsh_best", "lsh_insert"]


@njit(cache=True, nogil=True)
def lsh_insert(heads, nxt, codes, rows):  # pragma: no cover - compiled
    """Push each row onto the chain of its code in every table."""
    n_tables = heads.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i]
        for t in range(n_tables):
            c = codes[i, t]
            nxt[t, r] = heads[t, c]
            heads[t, c] = r


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):  # pragma: no cover - compiled
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, nogil=True, fastmath=True)
def lsh_best(heads, nxt, sigs, codes, qsigs, queries, vectors, max_ham, seen, stamp, best,
             best_row):  # pragma: no cover - compiled
    """For each query, the exact best cosine (and row) among the rows sharing a code with it
    in any table; ``best`` / ``best_row`` are updated in place where it beats them.

    A candidate whose sign bits (``sigs``, all tables' bits packed) differ from the query's
    in more than ``max_ham`` places is skipped before its vector is read: 48 bytes instead
    of a 1.5 KB row, which is what the check costs (a cache miss per row). ``seen`` (one
    int64 per row) with a fresh stamp per query skips rows met in several tables. Returns
    the next free stamp.
    """
    n_tables = heads.shape[0]
    dim = queries.shape[1]
    words = sigs.shape[1]
    for j in range(queries.shape[0]):
        stamp += 1
        for t in range(n_tables):
            r = heads[t, codes[j, t]]
            while r >= 0:
                if seen[r] != stamp:
                    seen[r] = stamp
                    ham = np.uint64(0)
                    for w in range(words):
                        ham += _popcount(sigs[r, w] ^ qsigs[j, w])
                    if ham <= max_ham:
                        s = np.float32(0.0)
                        for k in range(dim):
                            s += vectors[r, k] * queries[j, k]
                        if s > best[j]:
                            best[j] = s
                            best_row[j] = r
                r = nxt[t, r]
    return stamp
