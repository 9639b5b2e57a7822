"""The association phases of full resonance: spreading, priming, basin boost, inhibition.

Each takes the query's config, the `Sources` it reads and the candidate `Pool`, and changes
scores in place, recording its per-row factor in `pool.parts` (what `explain=True` shows)
and a summary in `facts` (None: the query is not explained, and no summary is made). Split
from resonator.py so each phase reads on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from ..graph.activation import TopSeeds
from ..recall.fusion import Candidates
from ..store.ops import FLAG_DELETED

if TYPE_CHECKING:
    from ..store.state import State
    from .config import ResonanceConfig
    from .sources import Sources

__all__ = ["Pool", "basin", "inhibit", "prime", "query_terms", "spread", "top_order"]

_TERM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.'-]*")


@dataclass
class Pool:
    """The candidates of one resonance query, as aligned arrays (rows = store rows)."""

    rows: np.ndarray
    hybrid: np.ndarray
    activation: np.ndarray
    hops: np.ndarray
    score: np.ndarray
    parts: dict[str, np.ndarray]  # phase -> per-row factor or value, for explain


def spread(
    cfg: ResonanceConfig, src: Sources, cands: Candidates, hybrid: np.ndarray,
    grow: Callable[[Candidates, np.ndarray], tuple[Candidates, np.ndarray]],
    facts: dict[str, Any] | None,
) -> tuple[Candidates, np.ndarray, np.ndarray, np.ndarray]:
    """Spreading activation from the top hybrid candidates through the knowledge graph.

    Memories reached with activation ≥ entry_threshold that were not candidates join the
    pool (the strongest `join` of them): ``grow(cands, rows)`` adds them with their hybrid
    signals computed exactly and returns the candidates and their hybrid relevance.
    Returns the (possibly grown) candidates, their hybrid relevance, activation and hop.
    """
    st = src.state
    graph = src.graph()
    adjacency = graph.adjacency()
    # each candidate's graph node (-1: none; one newer than this adjacency is never reached)
    nodes = src.nodes.of(st, graph.state, cands.ids)
    # the seeds: the top `seeds` candidates of hybrid relevance > 0, at their nodes (picked
    # in the kernel call that maps them); the strongest reached memories that were not
    # candidates join (bounded: association candidates below the top `join` never reach
    # the top k, and each costs a full scoring)
    reached = graph.reach(adjacency, TopSeeds(hybrid, nodes, cfg.seeds), nodes,
                          cfg.entry_threshold, cfg.join, strength=cfg.spread_strength,
                          decay=cfg.spread_decay, max_hops=cfg.max_hops, cutoff=cfg.cutoff)
    if not reached.seeds:
        return cands, hybrid, np.zeros(len(cands)), np.full(len(cands), -1, np.int64)
    activation, hops = reached.activation, reached.hops
    # the strongest reached memories, as store rows (one gather; -1: not in the store), the
    # forgotten ones left out, in their order
    joined = src.nodes.rows_of(st, graph.state, reached.nodes)
    keep = np.empty(joined.shape[0], np.int64)
    n_joined = _kernels().live_rows(joined, st.flags, FLAG_DELETED, keep)
    if n_joined:
        keep = keep[:n_joined]
        cands, hybrid = grow(cands, joined[keep])
        activation = np.concatenate([activation, reached.strengths[keep].astype(np.float64)])
        hops = np.concatenate([hops, reached.node_hops[keep].astype(np.int64)])
    if facts is not None:
        counts = np.bincount(hops[hops > 0]).tolist()  # by hop, ascending
        facts["spreading"] = {"seeds": reached.seeds, "reached": reached.reached,
                              "joined": n_joined,
                              "by_hop": {hop: c for hop, c in enumerate(counts) if c}}
    return cands, hybrid, activation, hops


def prime(cfg: ResonanceConfig, src: Sources, pool: Pool, session: str,
          facts: dict[str, Any] | None) -> None:
    """Session priming: recent observations ×priming_boost; active topics a smaller boost."""
    st = src.state
    recent = src.primer.recent(session)
    topics = src.primer.topics(session)
    if not recent and not topics:
        return
    # boost · (1 + topic_boost · share), each operation in that order (numpy's arithmetic,
    # element by element), and the score times it, in one kernel call; the recent memories
    # by row (a memory's id and row go together), without looking up every candidate's id
    recent_rows = np.sort(np.fromiter(map(st.rows.get, recent, repeat(-1)), np.int64,
                                      len(recent)))  # -1: none, which no pool row matches
    shares = _NO_SHARES
    if topics:
        graph = src.graph()
        gst = graph.state
        shares = graph.topic_shares_of(src.nodes.of(st, gst, pool.rows), topics, gst)
    factor = np.empty(len(pool.rows))
    boosted = _kernels().boost_members(np.ascontiguousarray(pool.rows, np.int64), recent_rows,
                                 float(cfg.priming_boost), np.ascontiguousarray(shares, np.float64),
                                 float(cfg.topic_boost), pool.score, factor)
    pool.parts["priming"] = factor
    if facts is not None:
        facts["priming"] = {"recent": len(recent), "topics": sorted(topics)[:10], "boosted": boosted}


def basin(cfg: ResonanceConfig, src: Sources, pool: Pool, query: str,
          facts: dict[str, Any] | None) -> None:
    """Attractor basin: the strongest attractor a query term names lifts its memories."""
    graph = src.graph()
    terms = set(query_terms(query))
    if not terms:
        return
    chosen = None
    for entity, strength in graph.attractors(cfg.attractors):
        if not terms.isdisjoint(_words(entity)) and (chosen is None or strength > chosen[1]):
            chosen = (entity, strength)
    if chosen is None:
        return
    # its memories by row (a memory's id and row go together; -1: none, which no pool row
    # matches), looked up and sorted in C, marked in the pool by the kernel priming uses:
    # boost_members × basin_boost, no share
    ids = graph.memories_of(chosen[0])
    members = np.sort(np.fromiter(map(src.state.rows.get, ids, repeat(-1)), np.int64, len(ids)))
    factor = np.empty(len(pool.rows))
    boosted = _kernels().boost_members(np.ascontiguousarray(pool.rows, np.int64), members,
                                       float(cfg.basin_boost), _NO_SHARES, 0.0, pool.score,
                                       factor)
    pool.parts["basin"] = factor
    if facts is not None:
        facts["basin"] = {"attractor": chosen[0], "strength": round(chosen[1], 4),
                          "boosted": boosted}


def inhibit(cfg: ResonanceConfig, state: State, pool: Pool, order: np.ndarray,
            facts: dict[str, Any] | None) -> np.ndarray:
    """Lateral inhibition over the top window: near-duplicates compete, winners damp losers.

    Bounded: cosines among at most `inhibition_window` candidates, and each winner damps at
    most `inhibition_max_competitors` later ones. ``order``: the pool's positions by score,
    at least the window's (`top_order`). Returns the new order.
    """
    window = order[: cfg.inhibition_window]
    rows = pool.rows[window]
    vecs = state.vectors[rows]
    sims = vecs @ vecs.T
    mult = np.ones(len(window))
    # the near-duplicate pairs (i before j) in row order, each winner damping at most
    # `inhibition_max_competitors` later ones: one kernel call (the threshold compared in
    # float32, as numpy compares a float32 array with it)
    damped = _kernels().inhibition(
        np.ascontiguousarray(sims, np.float32), np.float32(cfg.inhibition_threshold),
        float(cfg.inhibition_strength), int(cfg.inhibition_max_competitors), mult)
    if damped:
        full = np.ones(len(pool.rows))
        full[window] = mult
        pool.score = pool.score * full
        pool.parts["inhibition"] = full
        head = window[(-pool.score[window]).argsort(kind="stable")]
        order = np.concatenate([head, order[cfg.inhibition_window:]])
    if facts is not None:
        facts["inhibition"] = {"window": len(window), "damped": damped}
    return order


_KERNELS: dict[str, Any] = {}
_NO_SHARES = np.zeros(0)


def _kernels() -> Any:
    """kernels/phases.py, imported on first use."""
    module = _KERNELS.get("phases")
    if module is None:
        from ..kernels import phases as module

        _KERNELS["phases"] = module
    return module


def top_order(score: np.ndarray, m: int, out: np.ndarray) -> int:
    """The first ``m`` of the pool's positions by score, as numpy's stable argsort of
    −score orders them, into ``out``; how many (`kernels.phases.top_order`)."""
    return int(_kernels().top_order(score, m, out))


@lru_cache(maxsize=4096)
def _words(entity: str) -> frozenset[str]:
    """An attractor entity's words, as query terms are matched against them (the few
    attractors come back every query: split once)."""
    return frozenset(entity.lower().replace("_", " ").replace(".", " ").split())


def query_terms(query: str) -> list[str]:
    """The query's words, case-folded (for attractor matching)."""
    return [t.lower().strip(".'-") for t in _TERM.findall(query) if len(t) > 2]
