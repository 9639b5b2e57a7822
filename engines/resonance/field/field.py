"""The Field: the resonance engine's front door — remember, recall, forget, strengthen.

A Field composes the durable `Store` (every change logged before it is applied), an embedder,
and the recall indexes (`VectorIndex` over hnswlib, `BM25Index`, fused by `HybridSearcher`).
Row numbers of the store are the indexes' int ids. The indexes trail the store: new rows are
added to them in chunks when a recall or a duplicate check needs them, so writing stays at
store speed; rows not yet indexed are compared by brute force (at most `tail_limit` of them).

Uses from the embedder/index side: `Embedder.default()`, `.dim`, `.embed(texts) ->
Embeddings(vectors, ok)`; `VectorIndex(dim, IndexParams)` add/remove/search/save/load;
`BM25Index` add_many/remove; `HybridSearcher.search` with tag_of/confidence_of/allow
callables returning `FusedHit`s with `Components.as_dict()`.

Wanted from that side (not blocking; the Field works around each):
- `VectorIndex.search_many(vectors, k)`: one batched knn_query for duplicate checks (the
  Field loops over `search`, one lock round-trip per vector).
- `BM25Index.save/load`: a large field re-tokenises every text on its first recall.
- `VectorIndex.save` with a per-process temporary name: two processes closing one field at
  the same moment write the same `.tmp` file (the meta check then forces a rebuild).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, QualityGateRefused, StoreClosed
from ..memory import DAY, DECAY_RATES, Confidence, Kind, Memory, Tier, tier_of
from ..store.durable import CheckReport, Store
from .indexes import FieldIndexes
from .ingest import Ingest, Item
from .resonance import FieldResonance

__all__ = ["Field", "FieldConfig", "Hit"]

log = logging.getLogger("soul.engines.resonance")

Mode = Literal["hybrid", "semantic", "keyword"]
_STORE_KEYS = ("durability", "segment_bytes", "sync_interval", "compact_after", "keep_snapshots")
_ACCESS_QUEUE = 256
_RATES = np.array([DECAY_RATES[Kind(i)] for i in range(len(Kind))])


@dataclass(frozen=True)
class FieldConfig:
    """Options of a Field besides the store's (durability, segment_bytes, sync_interval,
    compact_after, keep_snapshots) and the fusion's (semantic_weight, method, ...)."""

    dedup_threshold: float | None = 0.95  # cosine at which remember() merges; None: never
    touch_on_recall: bool = True  # log an access for every recalled memory
    tail_limit: int = 4096  # rows compared by brute force before the vector index catches up
    batch_size: int = 512  # remember_many: items embedded and logged per step
    M: int = 16
    ef_construction: int = 200
    ef: int = 64
    entities: bool = True  # link each remembered memory to the entities its text names
    # Temporal contiguity: a new memory `follows` the one remembered before it in the same
    # session if that was at most this many seconds earlier (None: never). Measured on
    # LoCoMo (docs/memory.md): association along these edges is most of resonance's gain.
    contiguity: float | None = 1800.0
    contiguity_weight: float = 1.0


@dataclass(frozen=True)
class Hit:
    """One recalled memory with its score and the per-signal components behind it."""

    id: str
    text: str
    score: float
    kind: str
    tags: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    components: dict[str, Any] = field(default_factory=dict)


def _split_config(config: Mapping[str, Any]) -> tuple[dict, FieldConfig, Any]:
    from ..recall.fusion import FusionConfig

    config = {k: v for k, v in config.items() if k != "resonance"}
    store = {k: v for k, v in config.items() if k in _STORE_KEYS}
    own_names = {f.name for f in fields(FieldConfig)}
    fusion_names = {f.name for f in fields(FusionConfig)}
    unknown = set(config) - set(_STORE_KEYS) - own_names - fusion_names
    if unknown:
        known = ", ".join(sorted({*_STORE_KEYS, *own_names, *fusion_names}))
        raise ConfigError(f"unknown Field option(s) {', '.join(sorted(unknown))}; known: {known}")
    own = FieldConfig(**{k: v for k, v in config.items() if k in own_names})
    fusion = FusionConfig(**{k: v for k, v in config.items() if k in fusion_names})
    return store, own, fusion


class Field(FieldResonance):
    """A memory field on disk. Open with ``Field.open(path)``; use as a context manager."""

    def __init__(self, path: str | Path, embedder: Any = None, **config: Any) -> None:
        store_cfg, self.config, self._fusion = _split_config(config)
        self.path = Path(path)
        self.store = Store(self.path, **store_cfg)
        self._embedder = embedder
        self._lock = threading.RLock()
        self.indexes = FieldIndexes(self)
        self._ingest = Ingest(self)
        # Accesses from recall are queued and logged as one entry with the next write (or
        # every `_ACCESS_QUEUE` of them): recall itself never waits for the log.
        self._accessed: list[str] = []
        self._init_resonance(config.get("resonance"))
        for issue in self.store.report.issues:
            log.warning("resonance field %s: %s", self.path, issue)

    @classmethod
    def open(cls, path: str | Path, embedder: Any = None, **config: Any) -> Field:
        """Open (creating if needed) the field at ``path``.

        ``embedder``: any object with ``dim`` and ``embed(texts)``; None loads
        ``Embedder.default()`` the first time a text must be embedded. ``config``: store options
        (durability="fsync"|"batch"|"os", segment_bytes, sync_interval, compact_after,
        keep_snapshots), `FieldConfig` options, and fusion options (method, semantic_weight,
        keyword_weight, tag_weight, rrf_k, depth, ...); ``resonance``: a dict of
        `ResonanceConfig` options for `resonate()`.
        """
        return cls(path, embedder, **config)

    @staticmethod
    def check(path: str | Path) -> CheckReport:
        """Verify every segment's and snapshot's CRCs at ``path`` without changing anything."""
        return Store.check(path)

    def __enter__(self) -> Field:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedding -------------------------------------------------------------------------

    @property
    def embedder(self) -> Any:
        """The embedder, loading the default one on first use."""
        if self._embedder is None:
            from ..recall.embedder import Embedder

            self._embedder = Embedder.default()
        return self._embedder

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(unit vectors (n, dim) float32, ok mask): rows not ok are zero fallbacks."""
        if not texts:
            return np.zeros((0, self.store.state.dim or 0), np.float32), np.zeros(0, bool)
        out = self.embedder.embed(list(texts))
        vectors = np.asarray(getattr(out, "vectors", out), dtype=np.float32)
        ok = getattr(out, "ok", None)
        ok = np.linalg.norm(vectors, axis=1) > 0 if ok is None else np.asarray(ok, bool)
        return unit_rows(vectors), ok

    # -- writing ---------------------------------------------------------------------------

    def remember(
        self, text: str, *, kind: str | Kind = "episode", tags: Iterable[str] = (),
        realm: str | None = None, source: str | None = None, confidence: float | None = None,
        meta: Mapping[str, Any] | None = None, embedding: np.ndarray | None = None,
        session: str | None = None,
    ) -> str:
        """Store ``text`` as a memory and return its id.

        The quality gate refuses text shorter than 10 characters (``QualityGateRefused``); a
        near-duplicate (cosine ≥ ``dedup_threshold``, or the same text) is merged into the
        existing memory as a reinforcement and that memory's id is returned. A new memory is
        linked to the entities its text names and follows the previous memory remembered
        in the same ``session`` (see ``contiguity``).
        """
        self.flush_accesses()
        item = Item.build({"text": text, "kind": kind, "tags": tags, "realm": realm,
                           "source": source, "confidence": confidence, "meta": meta,
                           "embedding": embedding})
        if item.refused:
            raise QualityGateRefused(item.refused)
        before = self.store.state.n_rows
        [memory_id] = self._ingest.run([item])
        assert memory_id is not None
        self._link_new([memory_id], before, session)
        return memory_id

    def remember_many(
        self, items: Iterable[str | Mapping[str, Any]],
        progress: Callable[[int, int], None] | None = None, *, session: str | None = None,
    ) -> list[str | None]:
        """Remember many items (strings, or dicts with ``text`` and remember()'s keywords,
        ``embedding`` included); batched embedding and logging. Returns ids in order, None
        where the quality gate refused an item (the reason is logged). ``progress(done,
        total)`` is called after each batch."""
        self.flush_accesses()
        before = self.store.state.n_rows
        ids = self._ingest.remember_many(items, progress)
        self._link_new(ids, before, session)
        return ids

    def forget(self, memory_id: str) -> None:
        """Remove a memory (its content and vector are cleared from the store)."""
        with self._lock:
            self.flush_accesses()
            self._ingest.forgetting(self.store.state.row_of(memory_id))
            row = self.store.forget(memory_id)
            self.indexes.forgotten(row)
            if self._graph is not None or (self.path / "graph").exists():
                self.graph.forget_memory(memory_id)

    def strengthen(self, memory_id: str) -> Confidence:
        """Observe positive evidence for a memory; return its new confidence."""
        return self._observe(memory_id, 1.0)

    def weaken(self, memory_id: str) -> Confidence:
        """Observe negative evidence for a memory; return its new confidence."""
        return self._observe(memory_id, 0.0)

    def _observe(self, memory_id: str, value: float) -> Confidence:
        with self._lock:
            self.flush_accesses()
            self.store.observe(memory_id, value)
            st = self.store.state
            row = st.row_of(memory_id)
            return Confidence(st.mu[row], st.var[row], st.n[row])

    def reembed_pending(self, batch: int = 64) -> int:
        """Re-embed memories stored with a zero fallback vector; return how many now have a
        real one (the others stay pending)."""
        done = 0
        st = self.store.state
        rows = st.pending_rows()
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            vectors, ok = self.embed([st.text[r] for r in chunk])
            with self._lock:
                for row, vec, good in zip(chunk, vectors, ok, strict=True):
                    if good and st.is_alive(row):
                        self.store.reembed(st.ids[row], vec)
                        self.indexes.reembedded(row, vec)
                        done += 1
        return done

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        """The memory with this id (``UnknownMemory`` if there is none)."""
        if self._accessed:
            self.flush_accesses()
        st = self.store.state
        return st.memory(st.row_of(memory_id))

    def __len__(self) -> int:
        return len(self.store.state)

    def __contains__(self, memory_id: object) -> bool:
        row = self.store.state.rows.get(memory_id)  # type: ignore[arg-type]
        return row is not None and self.store.state.is_alive(row)

    def recall(
        self, query: str, k: int = 10, *, mode: Mode = "hybrid",
        tags: Iterable[str] | None = None,
    ) -> list[Hit]:
        """The ``k`` memories most relevant to ``query``, best first.

        ``mode``: "hybrid" (fused), "semantic" (cosine) or "keyword" (BM25). ``tags`` boost
        memories carrying them (weight ``tag_weight``); they do not filter.
        """
        from ..recall.hybrid import HybridSearcher

        if self.store.closed:
            raise StoreClosed("the field is closed")
        if mode not in ("hybrid", "semantic", "keyword"):
            raise ConfigError(f"recall mode must be hybrid, semantic or keyword, not {mode!r}")
        if k <= 0 or len(self.store.state) == 0:
            return []
        vector = None
        if mode != "keyword":
            vectors, ok = self.embed([query])
            vector = vectors[0] if ok[0] else None
            if vector is None:
                log.warning("query embedding failed: recall falls back to keywords")
        with self._lock:
            kindex = self.indexes.keyword()
            vindex = self.indexes.vector() if vector is not None else None
        searcher = HybridSearcher(kindex, vindex, self._fusion)
        wanted = frozenset(tags or ())
        st = self.store.state
        now = time.time()

        def tag_of(ids: np.ndarray) -> np.ndarray:
            if not wanted:
                return np.zeros(len(ids), np.float32)
            return np.array([len(wanted.intersection(st.tags_at(i))) / len(wanted) for i in ids],
                            np.float32)

        def confidence_of(ids: np.ndarray) -> np.ndarray:
            return self._confidence(ids, now)

        def allow(ids: np.ndarray) -> np.ndarray:
            return np.array([st.is_alive(i) for i in ids], bool)

        fused = searcher.search(query, vector, k, mode=mode, tag_of=tag_of,
                                confidence_of=confidence_of, allow=allow)
        hits = [
            Hit(st.ids[h.id], st.text[h.id], float(h.score), Kind(st.kind[h.id]).label,
                st.tags_at(h.id), st.meta_at(h.id), h.components.as_dict())
            for h in fused
        ]
        self._queue_accesses([h.id for h in hits])
        return hits

    def _queue_accesses(self, memory_ids: list[str]) -> None:
        """Queue recalled memories' accesses (touch_on_recall); logged in one entry with the
        next write, or once `_ACCESS_QUEUE` of them wait."""
        if memory_ids and self.config.touch_on_recall:
            self._accessed.extend(memory_ids)
            if len(self._accessed) >= _ACCESS_QUEUE:
                self.flush_accesses()

    def flush_accesses(self) -> None:
        """Log the accesses recall has queued (every write and close() do it too)."""
        with self._lock:
            queued, self._accessed = self._accessed, []
            alive = [m for m in queued if m in self]
            if alive and not self.store.closed:
                self.store.access(alive)

    def _confidence(self, rows: np.ndarray, now: float) -> np.ndarray:
        st = self.store.state
        rows = np.asarray(rows, np.int64)
        mu = np.array([st.mu[i] for i in rows])
        idle = np.array([now - st.last_active[i] for i in rows]) / DAY
        rate = _RATES[np.array([st.kind[i] for i in rows], np.int64)]
        return (mu * np.exp(-rate * np.maximum(idle, 0.0))).astype(np.float32)

    # -- indexes ---------------------------------------------------------------------------

    # -- housekeeping ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts by kind and tier, log and snapshot sizes, recovery and index facts."""
        self.flush_accesses()
        st = self.store.state
        now = time.time()
        alive = np.flatnonzero((np.frombuffer(bytes(st.flags), np.uint8) & 2) == 0)
        kinds = np.bincount(np.frombuffer(bytes(st.kind), np.uint8)[alive], minlength=len(Kind))
        tiers = {t.value: 0 for t in Tier}
        if len(alive):
            conf = self._confidence(alive, now)
            idle = (now - np.frombuffer(st.last_active, np.float64)[alive]) / DAY
            for c, d in zip(conf.tolist(), idle.tolist(), strict=True):
                tiers[tier_of(d, c).value] += 1
        wal = list((self.path / "wal").glob("*.seg"))
        rep = self.store.report
        emb_stats = getattr(self._embedder, "stats", None)
        return {
            "path": str(self.path),
            "memories": len(st),
            "rows": st.n_rows,
            "forgotten": st.n_rows - len(st),
            "pending_embeddings": len(st.pending_rows()),
            "dim": st.dim,
            "kinds": {Kind(i).label: int(c) for i, c in enumerate(kinds) if c},
            "tiers": tiers,
            "durability": self.store.writer.durability,
            "writer": self.store.writer.instance,
            "segments": len(wal),
            "wal_bytes": sum(p.stat().st_size for p in wal),
            "snapshot": str(self.store.snapshot) if self.store.snapshot else None,
            "recovery": {"replayed": rep.replayed, "seconds": round(rep.seconds, 4),
                         "issues": [str(i) for i in rep.issues]},
            **self.indexes.stats(),
            "embedder": emb_stats() if callable(emb_stats) else None,
        }

    def sync(self) -> None:
        """Make every change so far durable, whatever the durability mode."""
        self.flush_accesses()
        self.store.sync()

    def compact(self) -> Path | None:
        """Snapshot the store now (recovery then replays only what follows); None if skipped
        (see ``Store.compact``)."""
        self.flush_accesses()
        return self.store.compact()

    def close(self) -> None:
        """Save the vector index if it is current, compact if due, close the log."""
        with self._lock:
            if self.store.closed:
                return
            self.flush_accesses()
            self.indexes.save()
            self._close_resonance()
            self.store.close()


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
