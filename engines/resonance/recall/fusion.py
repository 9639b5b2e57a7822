"""Fusion: one relevance per candidate from the semantic, keyword, tag and confidence signals.

Weighted (the default), the seed's formula with our per-signal normalisation:

    relevance = (0.6·sem + 0.4·kw + 0.05·tag) · (0.5 + 0.5·confidence)

    sem = clip(cos − 0.3·hub, 0, 1)
          cos: cosine of query and memory (absolute scale, not rescaled per query);
          hub: cosine of the memory with the field's centroid. Generic memories ("Thanks!",
          "Sounds great") sit near the centroid and are similar to every query; discounting
          them is a hubness correction that the dense model needs in a field of chat turns.
    kw  = bm25 / max_C(bm25) · (0.5 + 0.5·coverage)
          bm25 over the candidates C, divided by the best; coverage = the share of the query's
          idf mass the memory contains, so one rare matching word does not outrank a memory
          that holds all of the query's words.
    tag = share of the requested tags the memory carries (0 when none requested)
    confidence = the memory's confidence mean in [0, 1]

The candidates C are the union of the semantic top-`depth` and the keyword top-`depth`, with
every signal computed exactly for each (a keyword hit's cosine and a semantic hit's BM25 are
looked up, never taken as 0). Measured on LoCoMo dev (docs/memory.md, "Fusion"): min-max
scaling of both signals gains +3.9 R@10 over keyword-only, these choices +7.2.

RRF (`method="rrf"`): relevance = Σ_s 1/(60 + rank_s) over the signals that ranked the
candidate (ranks from 1), times the same confidence factor; tags add 0.05·tag/60.

Every hit carries its `Components` (raw and normalised signals, ranks) for explanation. With
the calibrated normalisation (the default) a candidate whose relevance is 0 — no signal at
all — is no hit: recall returns fewer than k rather than memories that did not match.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError

__all__ = ["Candidates", "Components", "FusedHit", "FusionConfig", "fuse", "fused_relevance",
           "fused_scores", "rank_single"]


@dataclass(frozen=True)
class FusionConfig:
    """Weights and normalisation knobs of fusion (defaults: the documented formula)."""

    method: Literal["weighted", "rrf"] = "weighted"
    semantic_weight: float = 0.6
    keyword_weight: float = 0.4
    tag_weight: float = 0.05
    hub_penalty: float = 0.3  # α in sem = cos − α·hub; 0 turns the correction off
    coverage_floor: float = 0.5  # kw = bm25/max · (floor + (1 − floor)·coverage)
    rrf_k: int = 60
    depth: int = 100  # candidates taken from each of the semantic and keyword lists
    # "calibrated": the formulas above; "minmax": both signals min-max scaled over the
    # candidates (the common baseline, kept for comparison: 3.3 R@10 points lower on LoCoMo)
    normalisation: Literal["calibrated", "minmax"] = "calibrated"

    def __post_init__(self) -> None:
        if self.method not in ("weighted", "rrf"):
            raise ConfigError(f"fusion method must be 'weighted' or 'rrf', not {self.method!r}")
        if self.normalisation not in ("calibrated", "minmax"):
            raise ConfigError(f"normalisation must be 'calibrated' or 'minmax', "
                              f"not {self.normalisation!r}")
        if not 0.0 <= self.coverage_floor <= 1.0 or self.rrf_k < 1 or self.depth < 1:
            raise ConfigError(f"invalid fusion config: {self}")


@dataclass(frozen=True)
class Candidates:
    """Aligned arrays of candidate signals; NaN / -1 where a signal is unavailable."""

    ids: np.ndarray  # int64
    cosine: np.ndarray  # float32, NaN: no vector (e.g. pending re-embedding)
    hub: np.ndarray  # float32, cosine with the field centroid
    bm25: np.ndarray  # float32, 0 when no query term matches
    coverage: np.ndarray  # float32 in [0, 1]
    semantic_rank: np.ndarray  # int32, 1-based rank in the semantic list, -1 if absent
    keyword_rank: np.ndarray  # int32, 1-based rank in the keyword list, -1 if absent

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass(frozen=True)
class Components:
    """Why a hit scored what it did: every signal, raw and normalised."""

    semantic: float  # normalised, as it entered the formula
    keyword: float
    tag: float
    confidence: float
    cosine: float | None  # raw signals (None when unavailable)
    hub: float | None
    bm25: float
    coverage: float
    semantic_rank: int | None
    keyword_rank: int | None

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (for JSON output and Hit.components): every field, in order (the
        values are numbers or None: `dataclasses.asdict`'s deep copies were half a recall)."""
        return {name: getattr(self, name) for name in _COMPONENT_FIELDS}


_COMPONENT_FIELDS = tuple(f.name for f in fields(Components))


@dataclass(frozen=True)
class FusedHit:
    """One fused result: the caller's id, its relevance, and the components."""

    id: int
    score: float
    components: Components


def _normalise(cands: Candidates, cfg: FusionConfig) -> tuple[np.ndarray, np.ndarray]:
    """The sem and kw signals of the weighted formula (see the module docstring)."""
    if cfg.normalisation == "minmax":
        cos = cands.cosine.astype(np.float64)
        return _minmax(np.where(np.isnan(cos), 0.0, cos)), _minmax(cands.bm25.astype(np.float64))
    return _calibrated(cands, cfg)[:2]


_KERNEL: Any = None


def _calibrated(cands: Candidates, cfg: FusionConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sem, kw, semantic_weight·sem + keyword_weight·kw) with the calibrated normalisation:
    one kernel call (kernels/fusion.py; a few candidates: numpy's per-call cost was most of
    the time)."""
    global _KERNEL
    if _KERNEL is None:
        from ..kernels.fusion import weighted_calibrated as _KERNEL
    n = len(cands)
    sem, kw, base = np.empty(n), np.empty(n), np.empty(n)
    _KERNEL(_f32(cands.cosine), _f32(cands.hub), _f32(cands.bm25), _f32(cands.coverage),
            float(cfg.hub_penalty), float(cfg.coverage_floor), float(cfg.semantic_weight),
            float(cfg.keyword_weight), sem, kw, base)
    return sem, kw, base


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, np.float32)


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def fuse(
    cands: Candidates,
    k: int,
    config: FusionConfig | None = None,
    *,
    tag: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
) -> list[FusedHit]:
    """Rank `cands` by fused relevance; the best `k`, ties broken by id.

    `tag` (share of requested tags carried, 0..1) and `confidence` (0..1) are aligned with
    `cands.ids`; missing means 0 tags and confidence 1 (the factor is then 1 for all).
    """
    cfg = config or FusionConfig()
    n = len(cands)
    if n == 0 or k <= 0:
        return []
    score, sem, kw, tag_v, conf_v = fused_scores(cands, cfg, tag=tag, confidence=confidence)
    order = np.lexsort((cands.ids, -score))[:k]
    if cfg.normalisation == "calibrated":
        # on the absolute scale a relevance of 0 means no signal at all (a cosine the hub
        # penalty cancels, no query word, no tag): a candidate, not a hit
        order = order[score[order] > 0]
    return [_hit(cands, int(i), float(score[i]), sem, kw, tag_v, conf_v) for i in order]


def fused_scores(
    cands: Candidates, cfg: FusionConfig, *, tag: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(relevance, sem, kw, tag, confidence) per candidate, unranked and vectorised — what
    `fuse` ranks, for callers that need every candidate's score (full resonance)."""
    n = len(cands)
    tag_v = np.zeros(n) if tag is None else np.asarray(tag, dtype=np.float64)
    if confidence is None:
        conf_v = np.ones(n)
    else:
        conf_v = np.minimum(np.maximum(np.asarray(confidence, dtype=np.float64), 0.0), 1.0)
    if cfg.method == "weighted" and cfg.normalisation == "calibrated":
        sem, kw, base = _calibrated(cands, cfg)
    else:
        sem, kw = _normalise(cands, cfg)
    if cfg.method == "weighted":
        if cfg.normalisation != "calibrated":
            base = cfg.semantic_weight * sem + cfg.keyword_weight * kw
        if tag is not None:  # no tags: + 0 for every candidate
            base += cfg.tag_weight * tag_v
    else:
        srank = cands.semantic_rank.astype(np.float64)
        krank = cands.keyword_rank.astype(np.float64)
        base = np.where(srank > 0, 1.0 / (cfg.rrf_k + srank), 0.0)
        base += np.where(krank > 0, 1.0 / (cfg.rrf_k + krank), 0.0)
        base += cfg.tag_weight * tag_v / cfg.rrf_k
    if confidence is None:  # confidence 1 for all: the factor is 1
        return base, sem, kw, tag_v, conf_v
    return base * (0.5 + 0.5 * conf_v), sem, kw, tag_v, conf_v


def fused_relevance(
    cands: Candidates, cfg: FusionConfig, *, tag: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
) -> np.ndarray:
    """`fused_scores`' relevance alone (full resonance needs no other part): the same values,
    without the parts' arrays."""
    if cfg.method != "weighted" or cfg.normalisation != "calibrated":
        return fused_scores(cands, cfg, tag=tag, confidence=confidence)[0]
    base = _calibrated(cands, cfg)[2]
    if tag is not None:
        base += cfg.tag_weight * np.asarray(tag, dtype=np.float64)
    if confidence is None:
        return base
    conf_v = np.minimum(np.maximum(np.asarray(confidence, dtype=np.float64), 0.0), 1.0)
    return base * (0.5 + 0.5 * conf_v)


def rank_single(cands: Candidates, k: int, signal: Literal["semantic", "keyword"]) -> list[FusedHit]:
    """Single-signal ranking (recall modes "semantic"/"keyword"): score = cosine or BM25."""
    raw = cands.cosine if signal == "semantic" else cands.bm25
    raw = np.nan_to_num(raw.astype(np.float64), nan=-np.inf)
    keep = np.flatnonzero(np.isfinite(raw) & ((raw > 0) if signal == "keyword" else True))
    order = keep[np.lexsort((cands.ids[keep], -raw[keep]))][:k]
    cfg = FusionConfig()
    sem, kw = _normalise(cands, cfg)
    zeros, ones = np.zeros(len(cands)), np.ones(len(cands))
    return [_hit(cands, int(i), float(raw[i]), sem, kw, zeros, ones) for i in order]


def _opt(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _hit(
    cands: Candidates, i: int, score: float, sem: np.ndarray, kw: np.ndarray,
    tag: np.ndarray, conf: np.ndarray,
) -> FusedHit:
    srank, krank = int(cands.semantic_rank[i]), int(cands.keyword_rank[i])
    return FusedHit(
        id=int(cands.ids[i]),
        score=score,
        components=Components(
            semantic=float(sem[i]), keyword=float(kw[i]), tag=float(tag[i]),
            confidence=float(conf[i]), cosine=_opt(float(cands.cosine[i])),
            hub=_opt(float(cands.hub[i])), bm25=float(cands.bm25[i]),
            coverage=float(cands.coverage[i]),
            semantic_rank=srank if srank > 0 else None,
            keyword_rank=krank if krank > 0 else None,
        ),
    )
