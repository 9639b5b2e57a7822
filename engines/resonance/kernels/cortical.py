"""Numba kernels of the sparse codes and the cortical index (`resonance.sparse`, `.cortical`).

Plain functions over flat arrays, no validation (the callers own dtypes and shapes).

Sparse code: a random projection of a unit vector to `bits` values, then winner-take-all:
the indices of the `active` largest values, ascending. The structured projection is a stack
of `rounds` randomised Hadamard transforms per block of P = 2^p outputs (H·D3·H·D2·H·D1·x,
the "fast Johnson–Lindenstrauss" construction used by cross-polytope LSH), O(bits·log P)
per vector instead of the dense O(bits·dim).

Posting lists live in a pool of fixed-size blocks, one chain per bit:

    head[b]        first block of bit b (-1: empty)      nxt[blk]   next block (-1: last)
    tail[b]        last block of bit b                    pool[blk, i]  a slot id
    tail_fill[b]   entries used in the tail block (every other block of the chain is full)

Appending never moves a posting; the pool grows by doubling in the caller. A reader that
runs while a writer appends sees a prefix of each chain: blocks are filled before they are
linked, fresh blocks hold -1, and every slot/block index is bounds-checked against the
reader's snapshot, so a concurrent query may miss a row being added but never reads outside
its arrays.
"""

from __future__ import annotations

import numpy as np
from numba import float32, int32, int64, njit, uint8, void

__all__ = [
    "hadamard_project_topk",
    "overlap_count",
    "posting_append",
    "select_top",
    "wta_topk",
]


@njit(cache=True, nogil=True, inline="always")
def _heap_topk(values, k, idx, val):  # pragma: no cover - compiled
    """The k largest of `values` (ties: lower index wins) into idx/val as a min-heap."""
    m = 0
    n = values.shape[0]
    for i in range(n):
        v = values[i]
        if m < k:
            j = m
            m += 1
            while j > 0:
                p = (j - 1) >> 1
                # parent is "worse" than the new value: move it down
                if val[p] > v or (val[p] == v and idx[p] < i):
                    val[j] = val[p]
                    idx[j] = idx[p]
                    j = p
                else:
                    break
            val[j] = v
            idx[j] = i
        elif v > val[0]:  # equal values keep the earlier (lower) index already kept
            j = 0
            while True:
                left = 2 * j + 1
                if left >= m:
                    break
                c = left
                r = left + 1
                if r < m and (val[r] < val[left] or (val[r] == val[left] and idx[r] > idx[left])):
                    c = r
                if val[c] < v or (val[c] == v and idx[c] > i):
                    val[j] = val[c]
                    idx[j] = idx[c]
                    j = c
                else:
                    break
            val[j] = v
            idx[j] = i
    return m


@njit(void(float32[:, ::1], int64, int32[:, ::1]), cache=True, nogil=True)
def wta_topk(values, active, out):  # pragma: no cover - compiled
    """Winner-take-all per row: the `active` largest columns of `values`, ascending."""
    idx = np.empty(active, dtype=np.int64)
    val = np.empty(active, dtype=np.float32)
    for r in range(values.shape[0]):
        m = _heap_topk(values[r], active, idx, val)
        srt = np.sort(idx[:m])
        for j in range(m):
            out[r, j] = srt[j]


@njit(cache=True, nogil=True, inline="always")
def _fwht_columns(buf):  # pragma: no cover - compiled
    """In-place unnormalised Walsh–Hadamard transform of every column of buf (P, blocks).

    The butterflies run down the rows with the inner loop across the blocks, which are
    contiguous: every stage is a vectorisable add/subtract of two rows, where a transform
    of one block at a time has 1-, 2- and 4-wide inner loops that do not vectorise."""
    n = buf.shape[0]
    w = buf.shape[1]
    h = 1
    while h < n:
        for i in range(0, n, 2 * h):
            for j in range(i, i + h):
                for c in range(w):
                    a = buf[j, c]
                    b = buf[j + h, c]
                    buf[j, c] = a + b
                    buf[j + h, c] = a - b
        h *= 2


@njit(
    void(float32[:, ::1], float32[:, :, ::1], int64, int64, int32[:, ::1]),
    cache=True, nogil=True, fastmath=True,
)
def hadamard_project_topk(x, signs, bits, active, out):  # pragma: no cover - compiled
    """Structured projection + winner-take-all. x: (n, dim) rows; signs: (rounds, P,
    blocks) of ±1, P a power of two >= dim. Block b's outputs are H·D_r…H·D_1·x (x
    zero-padded to P) scaled by P^(-rounds/2) (each H·D is orthogonal up to √P), written
    to columns [b·P, (b+1)·P) ∩ [0, bits)."""
    rounds = signs.shape[0]
    p = signs.shape[1]
    n_blocks = signs.shape[2]
    dim = x.shape[1]
    scale = np.float32(1.0 / np.sqrt(np.float64(p)) ** rounds)
    values = np.empty(bits, dtype=np.float32)
    buf = np.empty((p, n_blocks), dtype=np.float32)
    idx = np.empty(active, dtype=np.int64)
    val = np.empty(active, dtype=np.float32)
    for r in range(x.shape[0]):
        for i in range(dim):
            xi = x[r, i]
            for c in range(n_blocks):
                buf[i, c] = xi * signs[0, i, c]
        for i in range(dim, p):
            for c in range(n_blocks):
                buf[i, c] = 0.0
        _fwht_columns(buf)
        for rd in range(1, rounds):
            for i in range(p):
                for c in range(n_blocks):
                    buf[i, c] *= signs[rd, i, c]
            _fwht_columns(buf)
        for c in range(n_blocks):
            base = c * p
            stop = min(p, bits - base)
            for i in range(stop):
                values[base + i] = buf[i, c] * scale
        m = _heap_topk(values, active, idx, val)
        srt = np.sort(idx[:m])
        for j in range(m):
            out[r, j] = srt[j]


@njit(
    int64(
        int32[:, ::1], int32[::1],  # pool, nxt
        int32[::1], int32[::1], int32[::1], int64[::1],  # head, tail, tail_fill, length
        int32[:, ::1], int64[::1], int64,  # codes (m, active), slots (m,), blocks in use
    ),
    cache=True, nogil=True,
)
def posting_append(pool, nxt, head, tail, tail_fill, length, codes, slots, n_used):
    """Append slot `slots[i]` to the posting list of every bit in `codes[i]` (codes < 0 are
    skipped); returns the new number of blocks in use. The caller guarantees the pool has
    room for every block this may open (at most m·active/B + min(bits, m·active) new blocks)."""
    bsize = pool.shape[1]
    for i in range(codes.shape[0]):
        s = np.int32(slots[i])
        for j in range(codes.shape[1]):
            b = codes[i, j]
            if b < 0:
                continue
            t = tail[b]
            if t < 0 or tail_fill[b] == bsize:
                blk = np.int32(n_used)
                n_used += 1
                pool[blk, 0] = s  # filled before it is linked (see the module doc)
                if t < 0:
                    head[b] = blk
                else:
                    nxt[t] = blk
                tail[b] = blk
                tail_fill[b] = 1
            else:
                pool[t, tail_fill[b]] = s
                tail_fill[b] += 1
            length[b] += 1
    return n_used


@njit(
    int64(
        int32[:, ::1], int32[::1], int32[::1], int32[::1],  # pool, nxt, head, tail_fill
        int32[::1], uint8[::1], int64,  # query bits, alive, n_slots (snapshot)
        int32[::1], int32[::1],  # counts (zero on entry), touched (out)
    ),
    cache=True, nogil=True,
)
def overlap_count(pool, nxt, head, tail_fill, q_bits, alive, n_slots, counts, touched):
    """counts[slot] = how many of the query's bits the slot's code shares; returns the
    number of distinct live slots touched (listed in `touched`, first-touch order)."""
    bsize = pool.shape[1]
    n_blocks = pool.shape[0]
    n_touched = 0
    for qi in range(q_bits.shape[0]):
        b = q_bits[qi]
        if b < 0 or b >= head.shape[0]:
            continue
        blk = head[b]
        while blk >= 0 and blk < n_blocks:
            nb = nxt[blk]
            cnt = bsize if nb >= 0 else tail_fill[b]
            for i in range(min(cnt, bsize)):
                s = pool[blk, i]
                if s < 0 or s >= n_slots or alive[s] == 0:
                    continue
                if counts[s] == 0:
                    touched[n_touched] = s
                    n_touched += 1
                counts[s] += 1
            blk = nb
    return n_touched


@njit(
    int64(int32[::1], int32[::1], int64, int64, int64[::1], int32[::1], int64[::1]),
    cache=True, nogil=True,
)
def select_top(counts, touched, n_touched, c, out_slots, out_counts, hist):
    """The `c` touched slots with the highest counts, best first (equal counts: lower slot
    first; at the cut-off count, the first touched are kept), into out_*; resets counts[touched] to 0 for the next query; returns how
    many. A counting selection over the overlap values (0..active): O(touched + c log c)."""
    hist[:] = 0
    for i in range(n_touched):
        hist[counts[touched[i]]] += 1
    # threshold t: fewest-overlap value still needed to fill c
    t = hist.shape[0] - 1
    acc = 0
    while t > 0:
        acc += hist[t]
        if acc >= c:
            break
        t -= 1
    if t < 1:
        t = 1
    above = 0
    for v in range(t + 1, hist.shape[0]):
        above += hist[v]
    need_ties = c - above
    m = 0
    # ties at t are taken in first-touch order (deterministic for a given index state), so
    # no buffer of all tied slots is needed
    for i in range(n_touched):
        s = touched[i]
        v = counts[s]
        if v > t or (v == t and need_ties > 0):
            if v == t:
                need_ties -= 1
            out_slots[m] = s
            out_counts[m] = v
            m += 1
        counts[s] = 0
    # best first: count descending, slot ascending
    key = np.empty(m, dtype=np.int64)
    for i in range(m):
        key[i] = (np.int64(hist.shape[0] - out_counts[i]) << 40) | out_slots[i]
    order = np.argsort(key)
    s_copy = out_slots[:m].copy()
    c_copy = out_counts[:m].copy()
    for i in range(m):
        out_slots[i] = s_copy[order[i]]
        out_counts[i] = c_copy[order[i]]
    return m
