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

import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..recall.fusion import Candidates, fused_scores
from ..store.ops import FLAG_DELETED

if TYPE_CHECKING:
    from ..field.field import Field

__all__ = ["PHASES", "ResonanceConfig", "Resonator", "SessionPrimer"]

PHASES = ("semantic", "keyword", "tags", "spreading", "priming", "code", "basin", "scoring",
          "inhibition", "hebbian", "credit")
_TERM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.'-]*")


@dataclass(frozen=True)
class ResonanceConfig:
    """Knobs of full resonance (defaults tuned on the LoCoMo dev file; docs/memory.md)."""

    depth: int = 100  # candidates from each of the semantic and keyword lists
    seeds: int = 20  # top hybrid candidates that start spreading activation
    activation_weight: float = 0.7
    entry_threshold: float = 0.05  # activation at which a non-candidate memory joins
    join: int = 50  # at most this many of those join (the strongest): each costs a scoring
    spread_strength: float | None = None  # None: the knowledge graph's SpreadConfig default
    # per hop; higher than the graph's 0.8 default so a turn's neighbours two or three turns
    # away still count (LoCoMo dev R@10: 0.7 → .753, 0.8 → .773, 0.9 → .785, 1.0 → .743)
    spread_decay: float | None = 0.9
    max_hops: int | None = None
    # a path stops once its activation falls below the entry threshold: activation only
    # decreases along a path, and the lost remainder changed no LoCoMo ranking (R@10 .784 at
    # cutoff .01, .02 and .05) while spreading reached 2.5× fewer nodes, 5× faster
    cutoff: float | None = 0.05
    priming_boost: float = 1.3
    priming_size: int = 50
    topic_boost: float = 0.1
    attractors: int = 10
    basin_boost: float = 1.05  # the seed's 1.15 cost 0.8 R@10 points on LoCoMo dev
    inhibition_threshold: float = 0.92  # the seed's 0.85 damped paraphrases, not duplicates
    inhibition_strength: float = 0.7
    inhibition_window: int = 50
    inhibition_max_competitors: int = 3
    hebbian: float = 0.03
    hebbian_top: int = 5
    code_symbols: int = 5
    code_relevance: float = 0.5
    learn: bool = False  # draw the parameters from the field's Thompson learner per query
    disabled: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        unknown = set(self.disabled) - set(PHASES)
        if unknown:
            raise ConfigError(f"unknown resonance phase(s) {sorted(unknown)}; phases: "
                              f"{', '.join(PHASES)}")
        if not 0.0 <= self.activation_weight <= 1.0:
            raise ConfigError(f"activation_weight must be in [0, 1], not {self.activation_weight}")
        if self.depth < 1 or self.seeds < 0 or self.inhibition_window < 1:
            raise ConfigError(f"invalid resonance config: {self}")
        object.__setattr__(self, "disabled", frozenset(self.disabled))

    def on(self, phase: str) -> bool:
        return phase not in self.disabled

    def tuned(self, params: dict[str, float]) -> ResonanceConfig:
        """A copy with the learner's drawn parameters (names as in learner.PARAMETERS)."""
        mapping = {"spread_strength": "spread_strength", "spread_decay": "spread_decay",
                   "hebbian": "hebbian", "basin_boost": "basin_boost",
                   "similarity_threshold": "inhibition_threshold",
                   "inhibition": "inhibition_strength"}
        changes: dict[str, Any] = {mapping[k]: float(v) for k, v in params.items() if k in mapping}
        if "semantic_weight" in params:
            changes["activation_weight"] = 1.0 - float(params["semantic_weight"])
        return replace(self, **changes)


class SessionPrimer:
    """Recent observations and active topics per session (in memory, bounded)."""

    def __init__(self, size: int = 50, sessions: int = 256) -> None:
        self.size = size
        self.sessions = sessions
        self._recent: dict[str, deque[str]] = {}
        self._topics: dict[str, Counter[str]] = {}

    def observe(self, session: str, memory_ids: list[str], topics: list[str] = ()) -> None:
        """Record memories the session saw (recalled, remembered) and the topics they touch."""
        if session not in self._recent and len(self._recent) >= self.sessions:
            oldest = next(iter(self._recent))  # dicts keep insertion order: drop the oldest
            self._recent.pop(oldest)
            self._topics.pop(oldest, None)
        recent = self._recent.setdefault(session, deque(maxlen=self.size))
        recent.extend(memory_ids)
        if topics:
            counts = self._topics.setdefault(session, Counter())
            for name in list(counts):  # older topics fade as new ones arrive
                counts[name] *= 0.8
                if counts[name] < 0.1:
                    del counts[name]
            counts.update(topics)

    def recent(self, session: str) -> frozenset[str]:
        return frozenset(self._recent.get(session, ()))

    def topics(self, session: str, n: int = 10) -> dict[str, float]:
        counts = self._topics.get(session)
        if not counts:
            return {}
        top = counts.most_common(n)
        best = top[0][1]
        return {name: c / best for name, c in top}


@dataclass
class _Pool:
    """The candidates of one resonance query, as aligned arrays (rows = store rows)."""

    rows: np.ndarray
    hybrid: np.ndarray
    activation: np.ndarray
    hops: np.ndarray
    score: np.ndarray
    parts: dict[str, np.ndarray]  # phase -> per-row factor or value, for explain


class Resonator:
    """Runs one resonance query over a Field (see the module docstring)."""

    def __init__(self, field: Field, config: ResonanceConfig) -> None:
        self.field = field
        self.config = config
        self._more_keyword: Any = None  # the keyword pass's scorer of further ids

    # -- phases 1–2: seeds (semantic + keyword + tags), hybrid relevance -----------------------

    def _candidates(self, query: str, vector: np.ndarray | None, kindex: Any,
                    vindex: Any) -> Candidates:
        """Hybrid recall's candidates (HybridSearcher), the modes the config leaves on; keeps
        the keyword scoring pass so `_extend` can score more candidates without a second."""
        from ..recall.hybrid import HybridSearcher

        sem, kw = self.config.on("semantic"), self.config.on("keyword")
        mode = "hybrid" if sem and kw else "semantic" if sem else "keyword"
        if not (sem or kw):
            self._more_keyword = None
            none = np.zeros(0, np.int64)
            return Candidates(none, *(np.zeros(0, np.float32) for _ in range(4)),
                              none.astype(np.int32), none.astype(np.int32))
        cands, self._more_keyword = HybridSearcher(kindex, vindex).candidates_keeping(
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
        st = self.field.store.state
        flags = np.frombuffer(st.flags, np.uint8)  # a view: no copy of the column
        alive = (flags[cands.ids] & FLAG_DELETED) == 0 if len(cands) else np.zeros(0, bool)
        tag = None
        if tags and self.config.on("tags"):
            tag = np.array([len(tags.intersection(st.tags_at(int(i)))) / len(tags)
                            for i in cands.ids], np.float32)
        # With the scoring phase on, its Confidence factor weighs confidence: fusing it in
        # here as well would count it twice.
        conf = None
        if len(cands) and not self.config.on("scoring"):
            conf = self.field._confidence(cands.ids, now)
        score = fused_scores(cands, self.field._fusion, tag=tag, confidence=conf)[0]
        score[~alive] = -1.0
        return score

    # -- the query ---------------------------------------------------------------------------

    def run(self, query: str, k: int, *, session: str | None, tags: frozenset[str],
            affect: Any, explain: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Rank memories for `query`; returns (hit rows, facts about the query)."""
        from .phases import basin, inhibit, prime, spread

        f, cfg = self.field, self.config
        now = time.time()
        facts: dict[str, Any] = {"phases": [p for p in PHASES if cfg.on(p)]}
        vector = None
        if cfg.on("semantic"):
            vectors, ok = f.embed([query])
            vector = vectors[0] if ok[0] else None
        kindex, vindex = _indexes(f, vector is not None)
        cands = self._candidates(query, vector, kindex, vindex)
        hybrid = self._hybrid(cands, tags, now)
        graph = f.graph if (cfg.on("spreading") or cfg.on("basin") or cfg.on("priming")) else None
        activation, hops = np.zeros(len(cands)), np.full(len(cands), -1, np.int64)
        if cfg.on("spreading") and graph is not None and len(cands):
            cands, hybrid, activation, hops = spread(self, vector, cands, hybrid, tags, now,
                                                     vindex, facts)
        keep = hybrid >= 0
        pool = _Pool(cands.ids[keep], hybrid[keep], activation[keep], hops[keep],
                     np.zeros(int(keep.sum())), {})
        aw = cfg.activation_weight if cfg.on("spreading") else 0.0
        pool.score = (1.0 - aw) * pool.hybrid + aw * pool.activation
        pool.parts["relevance"] = pool.score.copy()
        if session and cfg.on("priming") and len(pool.rows):
            prime(self, pool, session, facts)
        if cfg.on("basin") and graph is not None and len(pool.rows):
            basin(self, pool, query, facts)
        if cfg.on("scoring") and len(pool.rows):
            scored = f.scorer.score(f.store.state, pool.rows, pool.score, now=now,
                                    affect=affect, relevance_scale="unit")
            pool.parts.update({f"factor:{n}": v for n, v in scored.factors.items()})
            pool.score = np.asarray(scored.final, np.float64)
        order = np.argsort(-pool.score, kind="stable")
        if cfg.on("inhibition") and len(pool.rows) > 1:
            order = inhibit(self, pool, order, facts)
        top = order[:k]
        hits = [self._row(pool, int(j), explain) for j in top]
        if cfg.on("code"):
            hits = self._code(query, hits, k, facts)
        ids = [h["id"] for h in hits if h["kind"] != "symbol"]
        if cfg.on("hebbian") and graph is not None and len(ids) > 1 and cfg.hebbian > 0:
            graph.hebbian(ids[: cfg.hebbian_top], cfg.hebbian)
        if session:
            topics = [e for m in ids[:3] for e in (graph.entities_of(m) if graph else ())]
            f.primer.observe(session, ids[:5], topics)
        return hits, facts

    def _row(self, pool: _Pool, j: int, explain: bool) -> dict[str, Any]:
        st = self.field.store.state
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
              facts: dict[str, Any]) -> list[dict[str, Any]]:
        code = self.field.code_index(create=False)
        if code is None or self.config.code_symbols <= 0:
            return hits
        found = code.search_symbols(query, self.config.code_symbols)
        if not found:
            return hits
        best = max(s for _, s in found) or 1.0
        extra = [{"row": None, "id": f"symbol:{sym.qualified}", "kind": "symbol",
                  "symbol": sym, "score": self.config.code_relevance * s / best}
                 for sym, s in found]
        facts["code_symbols"] = len(extra)
        merged = sorted(hits + extra, key=lambda h: -h["score"])
        return merged[:k]


def _indexes(f: Field, semantic: bool) -> tuple[Any, Any]:
    """The keyword and vector indexes, caught up if the field's lock is free. While a writer
    holds it, a read uses the indexes as they are (they miss only the rows being written)
    rather than wait: reads never queue behind a write."""
    ix = f.indexes
    if f._lock.acquire(blocking=False):
        try:
            return ix.keyword(), ix.vector() if semantic else None
        finally:
            f._lock.release()
    if ix._kindex is not None and (ix._vindex is not None or not semantic):
        return ix._kindex, ix._vindex if semantic else None
    with f._lock:  # nothing built yet: the first read must wait for the build
        return ix.keyword(), ix.vector() if semantic else None


def query_terms(query: str) -> list[str]:
    """The query's words, case-folded (for attractor matching)."""
    return [t.lower().strip(".'-") for t in _TERM.findall(query) if len(t) > 2]
