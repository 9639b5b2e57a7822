"""Numba kernels of the BM25 index: score accumulation over CSR postings, top-k, CSR merge.

Plain functions over flat arrays, no validation (the caller, `resonance.bm25.BM25Index`,
owns the dtypes and shapes). Layout of an inverted index ("CSR by term"):

    term_offsets[t] .. term_offsets[t+1]   the postings of term t
    post_docs[p]                           the doc slot of posting p (ascending within a term)
    post_tf[p]                             the term frequency of posting p

Scoring is Lucene's BM25 (the variant bm25s calls "lucene"):

    score(d, q) = Σ_{t ∈ q} w_t · tf / (tf + k1 · (1 − b + b · len(d) / avgdl))

with w_t = idf(t) · count of t in the query, idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)),
computed by the caller (it owns N and df).
"""

from __future__ import annotations

import numpy as np
from numba import float32, int32, int64, njit, types, uint8

__all__ = ["bm25_accumulate", "csr_merge", "gather_slots", "search", "topk_sorted"]


@njit(
    int64(
        int64[::1], int32[::1], float32[::1],  # term_offsets, post_docs, post_tf
        float32[::1], uint8[::1],  # doc_len, alive
        int32[::1], float32[::1],  # query term ids, query term weights
        float32, float32, float32,  # k1, b, avgdl
        float32[::1], float32[::1],  # scores (in/out), matched query weight (in/out)
        int32[::1], int64,  # touched (out), n_touched in
    ),
    cache=True,
    nogil=True,
)
def bm25_accumulate(
    term_offsets, post_docs, post_tf, doc_len, alive, q_terms, q_weights, k1, b, avgdl,
    scores, matched, touched, n_touched,
):  # pragma: no cover - compiled
    """Add the BM25 contribution of each query term to `scores[slot]`; returns n touched.

    `matched[slot]` gains the term's query weight w_t, so matched / Σ w_t is the share of
    the query's idf mass the document contains (its "coverage", used by fusion).

    A slot enters `touched` the first time its score leaves 0 (every contribution is > 0,
    since idf > 0 and tf > 0), so the caller ranks only the touched slots, never all N.
    Term ids outside this CSR (terms newer than it) are skipped; dead slots are skipped.
    """
    n_terms = term_offsets.shape[0] - 1
    one_minus_b = np.float32(1.0) - b
    b_over_avg = b / avgdl
    for i in range(q_terms.shape[0]):
        t = q_terms[i]
        if t < 0 or t >= n_terms:
            continue
        w = q_weights[i]
        for p in range(term_offsets[t], term_offsets[t + 1]):
            d = post_docs[p]
            if alive[d] == 0:
                continue
            tf = post_tf[p]
            s = w * tf / (tf + k1 * (one_minus_b + b_over_avg * doc_len[d]))
            if scores[d] == 0.0:
                touched[n_touched] = d
                n_touched += 1
            scores[d] += s
            matched[d] += w
    return n_touched


@njit(cache=True, nogil=True)  # compiled on first use: not on a query's path
def gather_slots(slots, n_slots, scores, matched, out_scores, out_matched):  # pragma: no cover
    """``scores[slot]`` and ``matched[slot]`` of each of ``slots`` into out_*; 0 for a slot
    that is -1 (an id the index does not hold) or not below ``n_slots`` (newer than the
    scoring pass)."""
    for i in range(slots.shape[0]):
        slot = slots[i]
        if 0 <= slot < n_slots:
            out_scores[i] = scores[slot]
            out_matched[i] = matched[slot]
        else:
            out_scores[i] = 0.0
            out_matched[i] = 0.0


@njit(cache=True, inline="always")
def _better(sa, da, sb, db):  # pragma: no cover - compiled
    # Higher score first; ties go to the older (lower) slot so results are deterministic.
    return sa > sb or (sa == sb and da < db)


@njit(cache=True, inline="always")
def _sift_down(out_scores, out_slots, size, s, d):  # pragma: no cover - compiled
    """Put (s, d) at the root of the min-heap out_*[:size] and sift it down to its place."""
    j = 0
    while True:
        left = 2 * j + 1
        if left >= size:
            break
        child = left
        right = left + 1
        if right < size and _better(out_scores[left], out_slots[left],
                                    out_scores[right], out_slots[right]):
            child = right
        if _better(s, d, out_scores[child], out_slots[child]):
            out_scores[j] = out_scores[child]
            out_slots[j] = out_slots[child]
            j = child
        else:
            break
    out_scores[j] = s
    out_slots[j] = d


@njit(
    int64(float32[::1], int32[::1], int64, int64, int32[::1], float32[::1]),
    cache=True,
    nogil=True,
)
def topk_sorted(scores, cand, n_cand, k, out_slots, out_scores):  # pragma: no cover
    """The k best of `scores[cand[:n_cand]]`, best first, into out_*; returns how many.

    A size-k min-heap (root = worst kept), O(n log k): at 100k candidates and k = 100 this
    beats a full argsort and numpy's argpartition + the copy it needs.
    """
    m = 0
    for i in range(n_cand):
        d = cand[i]
        s = scores[d]
        if m < k:
            # sift up
            j = m
            m += 1
            while j > 0:
                parent = (j - 1) >> 1
                if _better(out_scores[parent], out_slots[parent], s, d):
                    out_scores[j] = out_scores[parent]
                    out_slots[j] = out_slots[parent]
                    j = parent
                else:
                    break
            out_scores[j] = s
            out_slots[j] = d
        elif _better(s, d, out_scores[0], out_slots[0]):
            _sift_down(out_scores, out_slots, m, s, d)  # replace the root
    # heap-sort in place: repeatedly move the worst to the end → best first
    end = m - 1
    while end > 0:
        s = out_scores[end]
        d = out_slots[end]
        out_scores[end] = out_scores[0]
        out_slots[end] = out_slots[0]
        _sift_down(out_scores, out_slots, end, s, d)
        end -= 1
    return m


@njit(
    types.UniTuple(int64, 2)(
        int64[::1], int32[::1], float32[::1],  # main CSR
        int64[::1], int32[::1], float32[::1],  # the append buffer's CSR
        float32[::1], uint8[::1], int64[::1],  # doc_len, alive, slot ids
        int32[::1], int32[::1], float32[::1],  # query term ids in main, in the buffer; weights
        float32, float32, float32, float32,  # k1, b, avgdl, 1 / Σ query weights
        float32[::1], float32[::1], int32[::1],  # scores, matched (in: zeros), touched
        int64, int64[::1], int64,  # k, the extra ids' slots (-1: none), slots of the pass
        int64[::1], float32[::1], float32[::1],  # out: top ids, scores, coverage
        float32[::1], float32[::1],  # out: the extra ids' scores and coverage
    ),
    cache=True,
    nogil=True,
)
def search(main_offsets, main_docs, main_tf, buf_offsets, buf_docs, buf_tf, doc_len, alive,
           slot_ids, q_terms, q_buf_terms, q_weights, k1, b, avgdl, inv, scores, matched,
           touched, k, extra, n_slots, out_ids, out_scores, out_cov, extra_scores,
           extra_cov):  # pragma: no cover - compiled
    """One keyword query in one call: `bm25_accumulate` over both CSRs (the buffer's CSR
    numbers its terms its own way: ``q_buf_terms`` are the query's terms there, -1 where it
    holds none), `topk_sorted` of the touched slots (their ids, scores, and coverage =
    matched · ``inv``), and the scores and coverage of the ``extra`` slots as `gather_slots`
    gives them (0 for -1 or a slot not below ``n_slots``). Returns (slots touched, hits)."""
    n = 0
    if q_terms.shape[0]:
        if main_docs.shape[0]:
            n = bm25_accumulate(main_offsets, main_docs, main_tf, doc_len, alive, q_terms,
                                q_weights, k1, b, avgdl, scores, matched, touched, n)
        if buf_docs.shape[0]:
            n = bm25_accumulate(buf_offsets, buf_docs, buf_tf, doc_len, alive, q_buf_terms,
                                q_weights, k1, b, avgdl, scores, matched, touched, n)
    m = 0
    if k:
        slots = np.empty(k, np.int32)
        m = topk_sorted(scores, touched, n, k, slots, out_scores)
        for i in range(m):
            out_ids[i] = slot_ids[slots[i]]
            out_cov[i] = matched[slots[i]] * inv
    for i in range(extra.shape[0]):
        slot = extra[i]
        got = np.float32(0.0)
        if 0 <= slot < n_slots:
            extra_scores[i] = scores[slot]
            got = matched[slot]
        else:
            extra_scores[i] = 0.0
        extra_cov[i] = got * inv
    return n, m


@njit(
    types.Tuple((int64[::1], int32[::1], float32[::1]))(
        int64[::1], int32[::1], float32[::1],  # main CSR
        int32[::1], int32[::1], float32[::1],  # appended postings: term, doc, tf
        int64, uint8[::1],  # n_terms of the result, alive
    ),
    cache=True,
    nogil=True,
)
def csr_merge(
    term_offsets, post_docs, post_tf, add_terms, add_docs, add_tf, n_terms, alive,
):  # pragma: no cover - compiled
    """Merge appended postings into a CSR, dropping dead slots: O(postings + terms).

    A counting sort by term: main postings are scattered before the appended ones, and
    appended slots are all newer than main slots, so docs stay ascending within each term.
    """
    counts = np.zeros(n_terms + 1, dtype=np.int64)
    n_main_terms = term_offsets.shape[0] - 1
    for t in range(n_main_terms):
        for p in range(term_offsets[t], term_offsets[t + 1]):
            if alive[post_docs[p]] != 0:
                counts[t + 1] += 1
    for j in range(add_terms.shape[0]):
        if alive[add_docs[j]] != 0:
            counts[add_terms[j] + 1] += 1
    for t in range(n_terms):
        counts[t + 1] += counts[t]
    nnz = counts[n_terms]
    docs = np.empty(nnz, dtype=np.int32)
    tfs = np.empty(nnz, dtype=np.float32)
    pos = counts[:-1].copy()
    for t in range(n_main_terms):
        for p in range(term_offsets[t], term_offsets[t + 1]):
            d = post_docs[p]
            if alive[d] != 0:
                q = pos[t]
                docs[q] = d
                tfs[q] = post_tf[p]
                pos[t] = q + 1
    for j in range(add_terms.shape[0]):
        d = add_docs[j]
        if alive[d] != 0:
            t = add_terms[j]
            q = pos[t]
            docs[q] = d
            tfs[q] = add_tf[j]
            pos[t] = q + 1
    return counts, docs, tfs
