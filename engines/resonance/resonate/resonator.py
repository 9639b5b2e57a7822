"""Full resonance: memories that surface by association, not by search alone.

`Field.resonate(query, k)` runs these phases (each can be switched off for an ablation):

    seeds ──── semantic (HNSW) + keyword (BM25) candidates, fused with tag match and
               confidence: the hybrid relevance `h` of fusion.py
    spreading  the top `seeds` candidates start activation a = h·strength in the knowledge
               graph (memory ─mentions─ entity ─relates─ entity ─mentions─ memory ...); a
               memory reached with a ≥ entry_threshold joins the candidates (its hybrid
               signals are computed exactly, like a seed's)
               relevance r = (1 − activation_weight)·h + activation_weight·a
    priming    memories observed recently in the session ×priming_boost; memories that
               mention the session's active topics ×(1 + topic_boost·share)
    code       symbols from the field's code index (if any), up to `code_symbols`
    basin      the strongest attractor entity that a query term names: memories mentioning
               it ×basin_boost
    scoring    × the scoring pipeline's product of factors (scoring.json; ACT-R, strength,
               status, kind, affect, ...) — relevance is a factor there
    inhibition in score order over the top `inhibition_window`, a winner damps each later
               near-duplicate (cos > threshold) by ×(1 − strength·cos), at most
               `inhibition_max_competitors` per winner: O(window²), not O(n²)
    hebbian    the top `hebbian_top` hits' pairwise links are strengthened — queued, applied
               off the read path, and decaying over time (kg.py)
    credit     the hits and their ranks are kept so `Field.feedback(id, useful)` can credit
               the parameters that surfaced them (the Thompson learner)

Nothing here takes the field's write lock for longer than fetching the index references.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..recall.fusion import Candidates, fused_relevance
from ..store.ops import FLAG_DELETED
from .config import PHASES, ResonanceConfig

if TYPE_CHECKING:
    from .phases import Pool
    from .sources import Sources

__all__ = ["Resonator"]

_LAZY: dict[str, Any] = {}  # the modules a query needs, imported by the first one


def _phases() -> Any:
    """resonate/phases.py (it loads the graph's modules: only once a query runs)."""
    module = _LAZY.get("phases")
    if module is None:
        from . import phases as module

        _LAZY["phases"] = module
    return module


def _fusion() -> Any:
    """kernels/fusion.py (`pool_relevance`, `drop_deleted`)."""
    module = _LAZY.get("fusion")
    if module is None:
        from ..kernels import fusion as module

        _LAZY["fusion"] = module
    return module


def _hybrid_searcher() -> Any:
    """recall/hybrid.py's HybridSearcher."""
    searcher = _LAZY.get("hybrid")
    if searcher is None:
        from ..recall.hybrid import HybridSearcher as searcher

        _LAZY["hybrid"] = searcher
    return searcher


class Resonator:
    """Runs one resonance query over a Field's `Sources` (see the module docstring)."""

    def __init__(self, sources: Sources, config: ResonanceConfig) -> None:
        self.sources = sources
        self.config = config
        self._more_keyword: Any = None  # the keyword pass's scorer of further ids

    # -- phases 1–2: seeds (semantic + keyword + tags), hybrid relevance -----------------------

    def _candidates(self, query: str, vector: np.ndarray | None, kindex: Any,
                    vindex: Any) -> Candidates:
        """Hybrid recall's candidates (HybridSearcher), the modes the config leaves on; keeps
        the keyword scoring pass so `_extend` can score more candidates without a second."""
        sem, kw = self.config.on("semantic"), self.config.on("keyword")
        mode = "hybrid" if sem and kw else "semantic" if sem else "keyword"
        if not (sem or kw):
            self._more_keyword = None
            none = np.zeros(0, np.int64)
            return Candidates(none, *(np.zeros(0, np.float32) for _ in range(4)),
                              none.astype(np.int32), none.astype(np.int32))
        cands, self._more_keyword = _hybrid_searcher()(kindex, vindex).candidates_keeping(
            query, vector, mode, self.config.depth)
        return cands

    def _extend(self, cands: Candidates, extra: np.ndarray, vector: np.ndarray | None,
                vindex: Any) -> Candidates:
        """`cands` plus the rows `extra` (ranked by neither list), their signals exact."""
        n = len(extra)
        if self._more_keyword is not None:
            bm25, cov = self._more_keyword(extra)
        else:
            bm25 = cov = np.zeros(n, np.float32)
        if vector is not None and vindex is not None and len(vindex):
            cos, hub = vindex.signals(vector, extra)
        else:
            cos = hub = np.full(n, np.nan, np.float32)
        none = np.full(n, -1, np.int32)
        parts = zip((cands.ids, cands.cosine, cands.hub, cands.bm25, cands.coverage,
                     cands.semantic_rank, cands.keyword_rank),
                    (extra, cos, hub, bm25, cov, none, none), strict=True)
        return Candidates(*(np.concatenate([a, b]) for a, b in parts))

    def _hybrid(self, cands: Candidates, tags: frozenset[str], now: float) -> np.ndarray:
        st = self.sources.state
        tag = None
        if tags and self.config.on("tags"):
            tag = np.array([len(tags.intersection(st.tags_at(int(i)))) / len(tags)
                            for i in cands.ids], np.float32)
        # With the scoring phase on, its Confidence factor weighs confidence: fusing it in
        # here as well would count it twice.
        conf = None
        if len(cands) and not self.config.on("scoring"):
            conf = self.sources.confidence(cands.ids, now)
        score = fused_relevance(cands, self.sources.fusion, tag=tag, confidence=conf)
        if len(cands):  # a memory forgotten since the indexes were read: -1, left out
            _fusion().drop_deleted(st.flags, np.ascontiguousarray(cands.ids, np.int64),
                                   FLAG_DELETED, score)
        return score

    # -- the query ---------------------------------------------------------------------------

    def run(self, query: str, k: int, *, session: str | None, tags: frozenset[str],
            affect: Any, explain: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Rank memories for `query`; returns (hit rows, facts about the query)."""
        phases = _phases()
        src, cfg = self.sources, self.config
        off = cfg.disabled  # `cfg.on(phase)` is `phase not in off`: a method call less a phase
        now = time.time()
        # the facts are only shown (explain): without it, no phase spends time writing them
        facts: dict[str, Any] | None = {"phases": [p for p in PHASES if p not in off]} if explain else None
        vector = None
        if "semantic" not in off:
            vectors, ok = src.embed([query])
            vector = vectors[0] if ok[0] else None
        kindex, vindex = src.indexes(vector is not None)
        cands = self._candidates(query, vector, kindex, vindex)
        hybrid = self._hybrid(cands, tags, now)
        spreading = "spreading" not in off
        graph = src.graph() if (spreading or "basin" not in off or "priming" not in off) else None
        if spreading and graph is not None and len(cands):

            def grow(cands: Candidates, extra: np.ndarray) -> tuple[Candidates, np.ndarray]:
                more = self._extend(cands, extra, vector, vindex)
                return more, self._hybrid(more, tags, now)

            cands, hybrid, activation, hops = phases.spread(cfg, src, cands, hybrid, grow, facts)
        else:
            activation, hops = np.zeros(len(cands)), np.full(len(cands), -1, np.int64)
        columns = (cands.ids, hybrid, activation, hops)
        aw = cfg.activation_weight if spreading else 0.0
        score = np.empty(len(hybrid))
        if not _fusion().pool_relevance(hybrid, np.ascontiguousarray(activation, np.float64), aw, score):
            keep = hybrid >= 0  # a forgotten candidate: left out
            columns = tuple(c[keep] for c in columns)
            score = score[keep]
        # the relevance before the phases' factors is only shown (explain)
        pool = phases.Pool(*columns, score, {"relevance": score.copy()} if explain else {})
        size = len(pool.rows)
        if session and size and "priming" not in off:
            phases.prime(cfg, src, pool, session, facts)
        if size and graph is not None and "basin" not in off:
            phases.basin(cfg, src, pool, query, facts)
        if size and "scoring" not in off:
            scored = src.scorer().score(src.state, pool.rows, pool.score, now=now,
                                    affect=affect, relevance_scale="unit")
            if explain:  # the parts are only shown
                pool.parts.update({f"factor:{n}": v for n, v in scored.factors.items()})
            pool.score = np.asarray(scored.final, np.float64)
        # the order of the scores as far as it is read: the top k, or the inhibition window
        inhibits = size > 1 and "inhibition" not in off
        order = np.empty(min(size, max(k, cfg.inhibition_window) if inhibits else k), np.int64)
        phases.top_order(np.ascontiguousarray(pool.score, np.float64), len(order), order)
        if inhibits:
            order = phases.inhibit(cfg, src.state, pool, order, facts)
        hits = [self._row(pool, j, explain) for j in order[:k].tolist()]
        if "code" not in off:
            hits = self._code(query, hits, k, facts)
        ids = [h["id"] for h in hits if h["kind"] != "symbol"]
        if graph is not None and len(ids) > 1 and cfg.hebbian > 0 and "hebbian" not in off:
            graph.hebbian(ids[: cfg.hebbian_top], cfg.hebbian)
        if session:
            topics = [e for m in ids[:3] for e in (graph.entities_of(m) if graph else ())]
            src.primer.observe(session, ids[:5], topics)
        return hits, facts or {}

    def _row(self, pool: Pool, j: int, explain: bool) -> dict[str, Any]:
        st = self.sources.state
        row = int(pool.rows[j])
        out: dict[str, Any] = {"row": row, "id": st.ids[row], "score": float(pool.score[j]),
                               "kind": None}
        if explain:
            parts = {"hybrid": round(float(pool.hybrid[j]), 6),
                     "activation": round(float(pool.activation[j]), 6),
                     "hop": int(pool.hops[j]) if pool.hops[j] >= 0 else None}
            parts.update({n: round(float(v[j]), 6) for n, v in pool.parts.items()})
            out["explain"] = parts
        return out

    def _code(self, query: str, hits: list[dict[str, Any]], k: int,
              facts: dict[str, Any] | None) -> list[dict[str, Any]]:
        code = self.sources.code_index()
        if code is None or self.config.code_symbols <= 0:
            return hits
        found = code.search_symbols(query, self.config.code_symbols)
        if not found:
            return hits
        best = max(s for _, s in found) or 1.0
        extra = [{"row": None, "id": f"symbol:{sym.qualified}", "kind": "symbol",
                  "symbol": sym, "score": self.config.code_relevance * s / best}
                 for sym, s in found]
        if facts is not None:
            facts["code_symbols"] = len(extra)
        merged = sorted(hits + extra, key=lambda h: -h["score"])
        return merged[:k]

