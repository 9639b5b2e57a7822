"""Numba kernels of the knowledge graph: symmetric CSR build, spreading activation and the
topic shares of session priming.

Plain functions over flat arrays, no validation (the callers, `resonance.adjacency` and
`resonance.kg`, own the dtypes and shapes). The graph is held as a main CSR

    indptr[u] .. indptr[u+1]      the slots of node u's out-edges (nodes < len(indptr) - 1)
    indices[p], weights[p]        the target node and weight of slot p

plus a small *delta* of edges added since the main CSR was built, as parallel arrays sorted by
source (``d_src``, ``d_dst``, ``d_w``), which the kernel looks up by binary search. Every
undirected edge is stored in both directions.

Spreading activation (`spread_activation`) is a hop-limited max-product propagation:

    act[seed]  = seed value (the caller has applied `strength` and clipped to [0, 1])
    hop h      : for u in the frontier of hop h-1, with the value u had at the end of hop h-1,
                 for each edge (u, v, w):  a = act_u · decay · w · damp(u)
                 if a >= cutoff and a > act[v]: act[v] = a, v joins the frontier of hop h
    damp(u)    = degree(u) ** -hub_power for entity nodes, 1 for memory nodes

so act[v] is the best product over paths of at most `max_hops` edges: it never exceeds the
largest seed value, stays in [0, 1], and an entity mentioned by many memories ("I", a user's
name) hands each of them only a 1/sqrt(degree) share when hub_power is 0.5.
"""

from __future__ import annotations

import numpy as np
from numba import float32, float64, int32, int64, njit, types, uint8

__all__ = ["build_csr", "harvest", "node_values", "reach", "reach_top", "seed_nodes",
           "spread_activation", "strong_nodes", "topic_shares"]


@njit(
    int64(
        int64, int32[::1], int32[::1], float32[::1], uint8[::1],  # n, src, dst, w, keep
        int64[::1], int32[::1], float32[::1],  # indptr (out, n+1), indices, weights (out)
        int64[::1], int64[::1],  # slot_fwd, slot_bwd (out, per edge; -1 when not kept)
    ),
    cache=True,
    nogil=True,
)
def build_csr(n, src, dst, w, keep, indptr, indices, weights, slot_fwd, slot_bwd):
    """Counting-sort the kept edges into a symmetric CSR; returns the number of slots.

    Slots of one node keep the edges' order (stable), so the CSR is deterministic. Each kept
    edge's two slots are recorded, so a later weight change can patch a copy of `weights`.
    """  # pragma: no cover - compiled
    for i in range(n + 1):
        indptr[i] = 0
    m = src.shape[0]
    for e in range(m):
        if keep[e]:
            indptr[src[e] + 1] += 1
            if src[e] != dst[e]:
                indptr[dst[e] + 1] += 1
    for i in range(n):
        indptr[i + 1] += indptr[i]
    fill = indptr[:n].copy()
    for e in range(m):
        if not keep[e]:
            slot_fwd[e] = -1
            slot_bwd[e] = -1
            continue
        s = src[e]
        d = dst[e]
        p = fill[s]
        fill[s] += 1
        indices[p] = d
        weights[p] = w[e]
        slot_fwd[e] = p
        if s != d:
            q = fill[d]
            fill[d] += 1
            indices[q] = s
            weights[q] = w[e]
            slot_bwd[e] = q
        else:
            slot_bwd[e] = -1
    return indptr[n]


@njit(cache=True, inline="always")
def _lower_bound(a, x):  # pragma: no cover - compiled
    lo = 0
    hi = a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# The argument types the spreading kernels share, in their order (each kernel's signature is
# its own: numba compiles and caches it, so every call site passes exactly these types)
_GRAPH = (
    int64[::1], int32[::1], float32[::1],  # main CSR
    int32[::1], int32[::1], float32[::1],  # delta: src (sorted), dst, w
    int32[::1], uint8[::1],  # degree, is_entity (per node)
)
_SPREADING = (float32, float32, int64, float32)  # decay, cutoff, max_hops, hub_power
_WORK = (
    float32[::1], int32[::1], int32[::1],  # act (in: zeros), hops (in: -1), touched (out)
    int32[::1], int32[::1], int32[::1], float32[::1],  # mark (in: -1), frontier, nxt, values
)
_CANDIDATES = (
    int64[::1], float32, int64,  # candidate nodes (-1: none), threshold, limit
    float64[::1], int64[::1],  # out: each candidate's activation and hop
    int32[::1], float32[::1], int32[::1],  # out: the strongest others' nodes, act., hops
)


@njit(
    int64(*_GRAPH, int32[::1], float32[::1], *_SPREADING, *_WORK),  # (seed nodes, seed values)
    cache=True,
    nogil=True,
)
def spread_activation(indptr, indices, weights, d_src, d_dst, d_w, degree, is_entity,
                      seed_nodes, seed_vals, decay, cutoff, max_hops, hub_power,
                      act, hops, touched, mark, frontier, nxt, values):
    """Propagate activation hop by hop from the seeds; returns how many nodes were reached.

    `touched[:n]` lists the reached nodes in the order they were first reached; `act` and
    `hops` hold their activation and the hop at which they were first reached (seeds: 0).
    Only touched entries of `act`, `hops` and `mark` are written, so a caller can reuse the
    arrays by resetting just those: at a million nodes, allocating and filling them per call
    cost more than the propagation. `frontier`, `nxt`, `values` are scratch (any content).
    """  # pragma: no cover - compiled
    n_main = indptr.shape[0] - 1
    n_touched = 0
    n_front = 0
    for i in range(seed_nodes.shape[0]):
        s = seed_nodes[i]
        a = seed_vals[i]
        if hops[s] < 0:
            hops[s] = 0
            touched[n_touched] = s
            n_touched += 1
        if a > act[s]:
            act[s] = a
        if mark[s] != 0:
            mark[s] = 0
            frontier[n_front] = s
            n_front += 1
    for i in range(n_front):
        values[i] = act[frontier[i]]
    for h in range(1, max_hops + 1):
        n_next = 0
        for i in range(n_front):
            u = frontier[i]
            base = values[i] * decay
            if is_entity[u] and hub_power > 0 and degree[u] > 1:
                base *= np.float32(degree[u]) ** (-hub_power)
            if base < cutoff:  # every weight is <= 1: nothing from u can reach the cutoff
                continue
            # The relax step below is written out twice (main CSR, then delta) on purpose: as an
            # inlined helper returning the two counters it ran 3x slower (0.96 -> 3.1 ms at 100k).
            if u < n_main:
                for p in range(indptr[u], indptr[u + 1]):
                    a = base * weights[p]
                    v = indices[p]
                    if a >= cutoff and a > act[v]:
                        if hops[v] < 0:
                            hops[v] = h
                            touched[n_touched] = v
                            n_touched += 1
                        act[v] = a
                        if mark[v] != h:
                            mark[v] = h
                            nxt[n_next] = v
                            n_next += 1
            p = _lower_bound(d_src, u)
            while p < d_src.shape[0] and d_src[p] == u:
                a = base * d_w[p]
                v = d_dst[p]
                if a >= cutoff and a > act[v]:
                    if hops[v] < 0:
                        hops[v] = h
                        touched[n_touched] = v
                        n_touched += 1
                    act[v] = a
                    if mark[v] != h:
                        mark[v] = h
                        nxt[n_next] = v
                        n_next += 1
                p += 1
        if n_next == 0:
            break
        # The next hop propagates what each node holds at the end of this hop: values are
        # read from a copy, so no path longer than max_hops edges can leak into the result.
        for i in range(n_next):
            frontier[i] = nxt[i]
            values[i] = act[nxt[i]]
        n_front = n_next
    return n_touched


@njit(
    types.UniTuple(int64, 2)(*_GRAPH, int32[::1], float32[::1], *_SPREADING, *_WORK, *_CANDIDATES),
    cache=True,
    nogil=True,
)
def reach(indptr, indices, weights, d_src, d_dst, d_w, degree, is_entity, seed_nodes,
          seed_vals, decay, cutoff, max_hops, hub_power, act, hops, touched, mark, frontier,
          nxt, values, cands, threshold, limit, cand_act, cand_hop, strong_nodes, strong_act,
          strong_hop):  # pragma: no cover - compiled
    """`spread_activation`, then what full resonance reads of it, the workspace put back as
    `harvest` puts it: each candidate node's activation and hop (0 and -1 where not reached
    or -1), and at most ``limit`` other memory nodes reached with activation ≥ ``threshold``
    (not entities, not candidates), strongest first, ties in the order they were reached —
    a `Spread`'s `of_nodes` and `strongest_memories`, without its arrays or sorts. Returns
    (nodes reached, strongest found)."""
    n = spread_activation(indptr, indices, weights, d_src, d_dst, d_w, degree, is_entity,
                          seed_nodes, seed_vals, decay, cutoff, max_hops, hub_power, act, hops,
                          touched, mark, frontier, nxt, values)
    size = hops.shape[0]  # a node past the workspace was never reached
    for i in range(cands.shape[0]):
        c = cands[i]
        if 0 <= c < size and hops[c] >= 0:
            cand_act[i] = act[c]
            cand_hop[i] = hops[c]
        else:
            cand_act[i] = 0.0
            cand_hop[i] = -1
        if 0 <= c < size:
            mark[c] = -2  # a candidate: not among the others
    m = 0
    for i in range(n if limit > 0 else 0):
        node = touched[i]
        a = act[node]
        if not a >= threshold or is_entity[node] != 0 or mark[node] == -2:
            continue
        if m == limit and not a > strong_act[m - 1]:
            continue
        j = m if m < limit else limit - 1  # insert, best first, after its equals
        while j > 0 and a > strong_act[j - 1]:
            strong_act[j] = strong_act[j - 1]
            strong_nodes[j] = strong_nodes[j - 1]
            strong_hop[j] = strong_hop[j - 1]
            j -= 1
        strong_act[j] = a
        strong_nodes[j] = node
        strong_hop[j] = hops[node]
        if m < limit:
            m += 1
    for i in range(n):
        node = touched[i]
        act[node] = 0.0
        hops[node] = -1
        mark[node] = -1
    for i in range(cands.shape[0]):
        if 0 <= cands[i] < size:
            mark[cands[i]] = -1
    return n, m


@njit(
    types.UniTuple(int64, 2)(
        float64[::1], int64[::1], int64, int64, float64,  # relevance, nodes, n_nodes, top, strength
        int32[::1], float32[::1],  # out: seed nodes, their values
    ),
    cache=True,
)
def seed_nodes(relevance, nodes, n_nodes, top, strength, out_nodes,
               out_vals):  # pragma: no cover - compiled
    """Full resonance's seeds: the ``top`` candidates of relevance > 0, most relevant first
    (equal ones in candidate order: numpy's stable argsort of −relevance), their graph
    nodes (``nodes``; -1 or past ``n_nodes``: not in this adjacency, left out) into
    ``out_nodes`` with the value ``min(max(relevance · strength, 0), 1)`` as float32 into
    ``out_vals``. Returns (how many seeds, how many of them are in the adjacency)."""
    if top <= 0:
        return 0, 0
    n = 0  # the seeds so far, by their positions, most relevant first
    order = np.empty(top, np.int64)
    for i in range(relevance.shape[0]):
        r = relevance[i]
        if not r > 0.0:
            continue
        if n == top and not r > relevance[order[n - 1]]:
            continue
        j = n if n < top else top - 1  # insert after its equals
        while j > 0 and r > relevance[order[j - 1]]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
        if n < top:
            n += 1
    m = 0
    for k in range(n):
        i = order[k]
        node = nodes[i]
        if 0 <= node < n_nodes:
            a = relevance[i] * strength  # min(max(a, 0.0), 1.0), as Python picks
            a = 0.0 if a < 0.0 else a
            out_nodes[m] = node
            out_vals[m] = 1.0 if a > 1.0 else a
            m += 1
    return n, m


@njit(
    types.UniTuple(int64, 4)(
        *_GRAPH,
        float64[::1], int64[::1], int64, int64, float64,  # seeds: relevance and node per
        # candidate, n_nodes, top, strength
        *_SPREADING, *_WORK, *_CANDIDATES,
    ),
    cache=True,
    nogil=True,
)
def reach_top(indptr, indices, weights, d_src, d_dst, d_w, degree, is_entity, relevance,
              relevance_nodes, n_nodes, top, strength, decay, cutoff, max_hops, hub_power, act, hops, touched, mark, frontier,
              nxt, values, cands, threshold, limit, cand_act, cand_hop, strong_nodes,
              strong_act, strong_hop):  # pragma: no cover - compiled
    """`seed_nodes` (the ``top`` of ``relevance``, at their nodes ``relevance_nodes``, in
    an adjacency of ``n_nodes``), then `reach` from them: full resonance's spreading in one
    call, not two. Returns (how many seeds,
    how many of them in the adjacency, nodes reached, strongest found)."""
    seeds, seed_vals = np.empty(max(top, 0), np.int32), np.empty(max(top, 0), np.float32)
    n_seeds, in_graph = seed_nodes(relevance, relevance_nodes, n_nodes, top, strength, seeds,
                                   seed_vals)
    n, m = reach(indptr, indices, weights, d_src, d_dst, d_w, degree, is_entity,
                 seeds[:in_graph], seed_vals[:in_graph], decay, cutoff, max_hops, hub_power,
                 act, hops, touched, mark, frontier, nxt, values, cands, threshold, limit,
                 cand_act, cand_hop, strong_nodes, strong_act, strong_hop)
    return n_seeds, in_graph, n, m


@njit(cache=True, nogil=True)  # compiled on first use: not on a query's path
def harvest(n, touched, act, hops, mark, nodes, activation,
            hop):  # pragma: no cover - compiled
    """The first ``n`` reached nodes of a `spread_activation` call (``touched[:n]``) with
    their activation and hop into ``nodes``/``activation``/``hop``, and their ``act``,
    ``hops`` and ``mark`` entries put back (0, -1, -1) for the next call."""
    for i in range(n):
        node = touched[i]
        nodes[i] = node
        activation[i] = act[node]
        hop[i] = hops[node]
        act[node] = 0.0
        hops[node] = -1
        mark[node] = -1


@njit(cache=True)  # compiled on first use: not on a query's path
def node_values(ranked: np.ndarray, order: np.ndarray, activation: np.ndarray,
                hops: np.ndarray, nodes: np.ndarray, act_out: np.ndarray,
                hop_out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The activation and first hop of each of ``nodes`` among the reached ones (``ranked``:
    them sorted, ``order``: where each sits in ``activation``/``hops``), 0 and -1 for a node
    not reached or -1; by binary search."""
    m = ranked.shape[0]
    for i in range(nodes.shape[0]):
        act_out[i] = 0.0
        hop_out[i] = -1
        q = nodes[i]
        if q < 0 or m == 0:
            continue
        at = np.searchsorted(ranked, q)
        if at < m and ranked[at] == q:
            act_out[i] = activation[order[at]]
            hop_out[i] = hops[order[at]]


@njit(cache=True)  # compiled on first use: not on a query's path
def strong_nodes(strong: np.ndarray, reached: np.ndarray, entity: np.ndarray,
                 memories_only: bool, known: np.ndarray,
                 out: np.ndarray) -> int:  # pragma: no cover - compiled
    """The positions of the ``strong`` reached nodes, in reached order, into ``out``; how
    many. With ``memories_only``, entity nodes (``entity`` flag 1) and the nodes in
    ``known`` (sorted) are left out."""
    n = 0
    for i in range(strong.shape[0]):
        if not strong[i]:
            continue
        if memories_only:
            node = reached[i]
            if entity[node] != 0:
                continue
            if known.shape[0]:
                at = np.searchsorted(known, node)
                if at < known.shape[0] and known[at] == node:
                    continue
        out[n] = i
        n += 1
    return n


@njit(
    types.void(
        int64[::1], int64[::1], int32[::1], int32[::1],  # nodes; start, count (per node), flat
        int64[::1], float64[::1], float64[::1],  # topic nodes, their weights; out (per node)
    ),
    cache=True,
)
def topic_shares(nodes, start, count, flat, topic_nodes, topic_weights, out):  # pragma: no cover
    """Per memory node ``nodes[i]`` (-1 or past ``start``: none), ``min(1, Σ weight)`` over the
    entities ``flat[start[n] : start[n] + count[n]]`` it mentions, summed in that order from
    0.0 (a topic node appears once in ``topic_nodes``; another entity adds nothing)."""
    n_rows = start.shape[0]
    n_topics = topic_nodes.shape[0]
    for i in range(nodes.shape[0]):
        node = nodes[i]
        total = 0.0
        if 0 <= node < n_rows:
            at = start[node]
            for j in range(at, at + count[node]):
                entity = flat[j]
                for t in range(n_topics):
                    if topic_nodes[t] == entity:
                        total += topic_weights[t]
                        break
        out[i] = total if total < 1.0 else 1.0
