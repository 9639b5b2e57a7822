"""The Field: the resonance engine's front door — remember, recall, resonate, forget.

A Field composes its collaborators, each built with exactly what it needs (the store, the
Field's lock, a config, a callable), none of them with the Field itself:

    Store           the durable memories: every change logged before it is applied
    FieldEmbedder   the embedder (the default loaded on first use); unit vectors
    FieldIndexes    the recall indexes (`VectorIndex` over hnswlib, `BM25Index`, fused by
                    `HybridSearcher`) and the duplicate index
    Ingest          the write side: quality gate, batched embedding, deduplication
    AccessQueue     the accesses recall queues, logged with the next write
    Association     the knowledge graph, full resonance, scoring and the learner

Row numbers of the store are the indexes' int ids. The indexes trail the store: new rows are
added to them in chunks when a recall or a duplicate check needs them, so writing stays at
store speed while nothing recalls; once a recall has built the recall indexes, every write
catches them up before it returns (`FieldIndexes.refresh`), and rebuilds the graph's read
caches a query has built (`GraphReads.prepare`), so the next recall only reads. Recall's search is `recall.hybrid_recall`; `stats()` is `stats.field_stats`.

``Field.open(path, read_only=True)`` opens an existing field, its graph and code index
without changing a file: no writer instance, no repair, no index saved, no access logged;
every write raises `ReadOnlyField`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import QualityGateRefused, ReadOnlyField, StoreClosed
from ..memory import Confidence, Kind, Memory
from ..recall.dedup import single_thread_blas
from ..store.durable import CheckReport, Store
from .accesses import AccessQueue
from .association import Association
from .config import FieldConfig, split_config
from .embedding import FieldEmbedder
from .hits import Hit
from .indexes import FieldIndexes
from .ingest import Ingest, Item
from .recall import Mode, hybrid_recall
from .stats import field_stats

if TYPE_CHECKING:
    from ..graph.kg import KnowledgeGraph
    from ..resonate.config import ResonanceConfig
    from ..resonate.learner import ThompsonLearner
    from ..resonate.priming import SessionPrimer
    from ..resonate.scoring import Scorer

__all__ = ["Field", "FieldConfig", "Hit"]

log = logging.getLogger("soul.engines.resonance")

_ACCESS_QUEUE = 256


class Field:
    """A memory field on disk. Open with ``Field.open(path)``; use as a context manager."""

    def __init__(self, path: str | Path, embedder: Any = None, *, read_only: bool = False,
                 **config: Any) -> None:
        split = split_config(config)
        self.path = Path(path)
        self.store = Store(self.path, read_only=read_only, **split.store)
        # one lock for every write and every index catch-up, shared with the collaborators
        # that take it (a reentrant lock: a write may flush queued accesses inside it)
        self._lock = threading.RLock()
        self._fusion = split.fusion
        try:  # a refused embedder (another model's field) must not leave a live writer
            self._embedding = FieldEmbedder(self.store, embedder)
        except BaseException:
            self.store.close()
            raise
        self.indexes = FieldIndexes(self.store, self.path, split.field, self._embedding,
                                    self._lock)
        self._ingest = Ingest(self.store, self._lock, self.indexes,
                              self._embedding.embed_for_write, split.field)
        # Accesses from recall are queued and logged as one entry with the next write (or
        # every `_ACCESS_QUEUE` of them): recall itself never waits for the log.
        self.accesses = AccessQueue(self.store, self._lock, _ACCESS_QUEUE)
        self.association = Association(self.path, self.store, self._embedding, self.indexes,
                                       split.fusion, split.field, split.resonance)
        self._config = split.field
        for issue in self.store.report.issues:
            log.warning("resonance field %s: %s", self.path, issue)

    @classmethod
    def open(cls, path: str | Path, embedder: Any = None, *, read_only: bool = False,
             **config: Any) -> Field:
        """Open (creating if needed) the field at ``path``.

        ``read_only``: open an existing field (`FieldNotFound` if there is none) and change
        no file under it; recall and resonate log no access, and every write raises
        `ReadOnlyField`.

        ``embedder``: any object with ``dim`` and ``embed(texts)``; None loads
        ``Embedder.default()`` the first time a text must be embedded. ``config``: store options
        (durability="fsync"|"batch"|"os", segment_bytes, sync_interval, compact_after,
        keep_snapshots), `FieldConfig` options, and fusion options (method, semantic_weight,
        keyword_weight, tag_weight, rrf_k, depth, ...); ``resonance``: a dict of
        `ResonanceConfig` options for `resonate()`.
        """
        return cls(path, embedder, read_only=read_only, **config)

    @staticmethod
    def check(path: str | Path) -> CheckReport:
        """Verify both logs (the store's and the knowledge graph's) at ``path`` without
        changing anything: CRCs, quarantined damage, killed compactions' leftovers."""
        from .check import check_field

        return check_field(path)

    def __enter__(self) -> Field:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the collaborators' parts --------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """True if opened with ``read_only=True``."""
        return self.store.read_only

    def _writable(self, operation: str) -> None:
        if self.store.read_only:
            raise ReadOnlyField(operation, self.path)

    @property
    def config(self) -> FieldConfig:
        """The field's options; replacing them on an open field reaches every collaborator."""
        return self._config

    @config.setter
    def config(self, config: FieldConfig) -> None:
        self._config = self.indexes.config = self._ingest.config = config
        self.association.config = config

    @property
    def embedder(self) -> Any:
        """The embedder, loading the default one on first use."""
        return self._embedding.embedder

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(unit vectors (n, dim) float32, ok mask): rows not ok are zero fallbacks."""
        return self._embedding.embed(texts)

    def embed_query(self, text: str) -> None:
        """Embed a search's query now (a turn's warm-up, in a worker thread): the search that
        asks for it next finds its unit vector made (`FieldEmbedder.query`)."""
        self._embedding.query([text])

    def knows(self, text: str) -> bool:
        """Whether embedding `text` would run no model: its vector is cached (loads nothing)."""
        return self._embedding.knows(text)

    @property
    def embedder_record(self) -> dict[str, object] | None:
        """The embedding model the field's vectors come from (name, dim, sha256), as
        logged on its first write; None if it has none yet."""
        return self.store.state.embedder

    @property
    def resonance(self) -> ResonanceConfig:
        """The defaults of `resonate()` (the ``resonance`` option of `open`)."""
        return self.association.resonance

    @property
    def primer(self) -> SessionPrimer:
        """What each session saw recently: `resonate(..., session=...)` primes with it."""
        return self.association.primer

    @property
    def graph(self) -> KnowledgeGraph:
        """The field's knowledge graph (``<field>/graph``), opened on first use."""
        return self.association.graph

    @property
    def scorer(self) -> Scorer:
        """The scoring pipeline (``<field>/scoring.json`` if it exists, else the defaults)."""
        return self.association.scorer

    @property
    def learner(self) -> ThompsonLearner:
        """The Thompson learner over the resonance parameters (``<field>/learner.json``)."""
        return self.association.learner

    def code_index(self, *, create: bool = True) -> Any:
        """The field's code index (``<field>/code``); None if there is none and not `create`."""
        return self.association.code_index(create=create)

    # -- writing ---------------------------------------------------------------------------

    def relate(self, subject: str, predicate: str, obj: str, *, weight: float = 1.0,
               valid_from: float | None = None, memory: str | None = None) -> int:
        """State a fact (subject, predicate, object) in the knowledge graph; its id."""
        self._writable("relate")
        return self.graph.relate(subject, predicate, obj, weight=weight,
                                 valid_from=valid_from, memory=memory)

    def link_entities(self, memory_ids: Iterable[str] | None = None) -> int:
        """Link memories to the entities their text names (done on every remember when
        ``entities`` is on); None: every memory not linked yet. Returns how many."""
        self._writable("link entities")
        return self.association.link_entities(memory_ids)

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
        in the same ``session`` (see ``contiguity``); its vector carries that memory's as
        context (``context_weight``, field/context.py) unless ``embedding`` is given.
        """
        self._writable("remember")
        self.flush_accesses()
        item = Item.build({"text": text, "kind": kind, "tags": tags, "realm": realm,
                           "source": source, "confidence": confidence, "meta": meta,
                           "embedding": embedding})
        if item.refused:
            raise QualityGateRefused(item.refused)
        before = self.store.state.n_rows
        [memory_id] = self._ingest.run([item], self.association.context_chain(session))
        assert memory_id is not None
        self.association.linked([memory_id], before, session)
        self._prepare_reads()
        return memory_id

    def remember_many(
        self, items: Iterable[str | Mapping[str, Any]],
        progress: Callable[[int, int], None] | None = None, *, session: str | None = None,
    ) -> list[str | None]:
        """Remember many items (strings, or dicts with ``text`` and remember()'s keywords,
        ``embedding`` included); batched embedding and logging. Returns ids in order, None
        where the quality gate refused an item (the reason is logged). ``progress(done,
        total)`` is called after each batch. The items are one ``session`` chain, in order:
        each embedded one carries the one before it as context (see `remember`)."""
        self._writable("remember")
        self.flush_accesses()
        before = self.store.state.n_rows
        ids = self._ingest.remember_many(items, progress, self.association.context_chain(session))
        self.association.linked(ids, before, session)
        self._prepare_reads()
        return ids

    def _prepare_reads(self) -> None:
        """After a write: the recall indexes a recall has built take in its rows, and the
        graph's adjacency and attractors a query has read are rebuilt, and the access
        histories of the memories whose accesses were logged read for scoring, now, in the
        writer's thread, not in the next recall's."""
        with self._lock:
            self.indexes.refresh()
        self.association.prepare(self.accesses.take_logged())

    def forget(self, memory_id: str) -> None:
        """Remove a memory (its content and vector are cleared from the store)."""
        self._writable("forget")
        with self._lock:
            self.flush_accesses()
            self._ingest.forgetting(self.store.state.row_of(memory_id))
            row = self.store.forget(memory_id)
            self.indexes.forgotten(row)
            self.association.forgotten(memory_id)

    def strengthen(self, memory_id: str) -> Confidence:
        """Observe positive evidence for a memory; return its new confidence."""
        return self._observe(memory_id, 1.0)

    def weaken(self, memory_id: str) -> Confidence:
        """Observe negative evidence for a memory; return its new confidence."""
        return self._observe(memory_id, 0.0)

    def _observe(self, memory_id: str, value: float) -> Confidence:
        self._writable("strengthen" if value else "weaken")
        with self._lock:
            self.flush_accesses()
            self.store.observe(memory_id, value)
            st = self.store.state
            row = st.row_of(memory_id)
            return Confidence(st.mu[row], st.var[row], st.n[row])

    def reembed_pending(self, batch: int = 64) -> int:
        """Re-embed memories stored with a zero fallback vector; return how many now have a
        real one (the others stay pending). With session context on, their session chains
        are replayed (field/replay.py)."""
        self._writable("re-embed")
        from .replay import follows_links, replay_pending

        cfg, st = self.config, self.store.state
        chained = bool(cfg.context_weight) and cfg.contiguity is not None and st.pending_rows()
        links = follows_links(self.association.graph.state, st) if chained else {}
        return replay_pending(self.store, self._embedding.embed_for_write, self.indexes,
                              self._lock, links, cfg.context_weight or 0.0, batch)

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        """The memory with this id (``UnknownMemory`` if there is none)."""
        if len(self.accesses):
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
        tags: Iterable[str] | None = None, touch: bool | None = None,
    ) -> list[Hit]:
        """The ``k`` memories most relevant to ``query``, best first.

        ``mode``: "hybrid" (fused), "semantic" (cosine) or "keyword" (BM25). ``tags`` boost
        memories carrying them (weight ``tag_weight``); they do not filter. ``touch``: queue
        the hits' accesses (None: as ``touch_on_recall`` says; False: queue none, e.g. to
        `touch` them later, once the answer is known to be used).
        """
        if self.store.closed:
            raise StoreClosed("the field is closed")
        with single_thread_blas():  # a query's products are small: see `resonate`
            hits = hybrid_recall(self.store.state, self.indexes, self._fusion, self._embedding.query, query,
                                 k, mode, tags)
        self._queue_accesses([h.id for h in hits], touch)
        return hits

    def resonate(
        self, query: str, k: int = 10, *, session: str | None = None, explain: bool = False,
        tags: Iterable[str] | None = None, affect: Any = None, learn: bool | None = None,
        touch: bool | None = None, **overrides: Any,
    ) -> list[Hit]:
        """Full resonance: the ``k`` memories that best answer ``query`` by content and by
        association (module resonate/resonator.py lists the phases).

        ``session`` primes with what that session saw recently; ``affect`` (a
        scoring.Affect, e.g. from Chetana) drives the mood factors; ``explain`` fills each
        hit's ``components`` with every phase's contribution; ``learn`` draws the parameters
        from the Thompson learner (default: the ``learn`` option of the resonance config);
        ``overrides``: ResonanceConfig fields for this query only (e.g. disabled={"spreading"});
        ``touch``: as for `recall`.
        """
        if self.store.closed:
            raise StoreClosed("the field is closed")
        # A query's products are too small to share: on more BLAS threads they took as long,
        # twice the CPU (a thread spinning), p90 3.2-16 ms against 2.6-2.8 (3,000 memories).
        with single_thread_blas():
            hits = self.association.resonate(query, k, session=session, explain=explain,
                                             tags=tags, affect=affect, learn=learn,
                                             overrides=overrides)
        self._queue_accesses([h.id for h in hits if h.kind != "symbol"], touch)
        return hits

    def feedback(self, memory_id: str, useful: bool) -> None:
        """Say whether a recalled memory helped: its confidence observes it, and the learner
        credits the parameters that surfaced it (discounted by its rank)."""
        (self.strengthen if useful else self.weaken)(memory_id)
        self.association.credit(memory_id, useful)

    def _queue_accesses(self, memory_ids: list[str], touch: bool | None) -> None:
        """Queue recalled memories' accesses if `touch` (None: ``touch_on_recall``)."""
        if memory_ids and (self.config.touch_on_recall if touch is None else touch):
            self.accesses.add(memory_ids)

    def touch(self, memory_ids: Iterable[str]) -> None:
        """Queue an access of each memory, as a recall that returned them does (logged with
        the next write, `get`, `stats`, `close` or every 256). Ids no longer alive when the
        queue is logged (unknown, forgotten) are dropped. `ReadOnlyField` if read-only."""
        self._writable("log accesses")
        if self.store.closed:
            raise StoreClosed("the field is closed")
        self.accesses.add(list(memory_ids))

    def flush_accesses(self) -> None:
        """Log the accesses recall has queued (every write and close() do it too)."""
        self.accesses.flush()

    # -- housekeeping ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts by kind and tier, log and snapshot sizes, recovery and index facts."""
        self.flush_accesses()
        return field_stats(self.path, self.store, self.indexes, self.association,
                           self._embedding.loaded)

    def sync(self) -> None:
        """Make every change so far durable, whatever the durability mode."""
        self.flush_accesses()
        self.store.sync()

    def compact(self) -> Path | None:
        """Snapshot the store now (recovery then replays only what follows); None if skipped
        (see ``Store.compact``)."""
        self._writable("compact")
        self.flush_accesses()
        return self.store.compact()

    def close(self) -> None:
        """Save the vector index if it is current, compact if due, close the log."""
        with self._lock:
            if self.store.closed:
                return
            self.flush_accesses()
            self.indexes.save()
            self.association.close()
            self.store.close()
