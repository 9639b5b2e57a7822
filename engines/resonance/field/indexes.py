"""A Field's indexes: HNSW vectors and BM25 keywords for recall, LSH for duplicate checks.

Row numbers of the store are the indexes' int ids. The recall indexes trail the store: rows
written since the last catch-up are added in chunks when a recall needs them, so remembering
runs at store speed while nothing recalls (a bulk load). Once a recall has built them, each
write catches them up itself (`refresh`): a conversation writes in a worker thread between
two recalls, and its next recall then finds the indexes current instead of inserting the
last turn's rows on the turn's own thread. The duplicate check has its own index (`dedup.DupIndex`), which takes in
each new row as it is written (its hash is already computed by the check). The vector index
is saved at close, stamped with the set of log entries the state holds, and loaded at the
next open only if that stamp and its count match.

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
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import IndexStale

if TYPE_CHECKING:
    from ..store.durable import Store
    from .config import FieldConfig
    from .embedding import FieldEmbedder

__all__ = ["FieldIndexes"]

log = logging.getLogger("soul.engines.resonance")
_CHUNK = 20_000  # rows per add to the vector index while catching up


class FieldIndexes:
    """The vector, keyword and duplicate indexes over one Field's store.

    Callers hold the Field's ``lock`` around every method but `caught_up` and `for_reading`,
    which take it themselves. ``config`` gives the HNSW parameters; ``embedding`` the
    dimension while the store has none yet.
    """

    def __init__(self, store: Store, path: Path, config: FieldConfig,
                 embedding: FieldEmbedder, lock: threading.RLock) -> None:
        self.store = store
        self.config = config
        self._embedding = embedding
        self._lock = lock
        self.path = path / "index" / "vectors.hnsw"
        self._vindex: Any = None  # VectorIndex once needed
        self._v_upto = 0  # rows below this were offered to the vector index
        self._kindex: Any = None  # BM25Index once needed
        self._k_upto = 0
        self._dup: Any = None  # DupIndex once a duplicate check needs it
        self._d_upto = 0
        self._last_codes: tuple[np.ndarray, np.ndarray] | None = None

    def stamp(self) -> int:
        """Identifies the set of applied log entries (and so the row numbering) of the state."""
        st = self.store.state
        return zlib.crc32(repr((st.n_rows, sorted(st.covered.items()))).encode())

    def indexable(self, start: int, stop: int) -> np.ndarray:
        """Rows in [start, stop) that are alive and have a real (not fallback) vector."""
        flags = np.frombuffer(bytes(self.store.state.flags[start:stop]), np.uint8)
        return np.flatnonzero(flags == 0) + start

    def vector(self) -> Any:
        """The vector index, loaded or built, caught up with every row."""
        st, cfg = self.store.state, self.config
        if self._vindex is None:
            from ..recall.index import IndexParams, VectorIndex  # here: every query asks

            params = IndexParams(M=cfg.M, ef_construction=cfg.ef_construction, ef=cfg.ef)
            try:
                self._vindex = VectorIndex.load(
                    self.path, expect_seq=self.stamp(),
                    expect_count=len(self.indexable(0, st.n_rows)), params=params,
                )
                self._v_upto = st.n_rows
            except IndexStale as exc:
                if self.path.exists():
                    log.info("rebuilding the vector index: %s", exc)
                self._vindex = VectorIndex(st.dim or self._embedding.embedder.dim, params)
                self._v_upto = 0
        if self._v_upto < st.n_rows:
            stop = st.n_rows
            rows = self.indexable(self._v_upto, stop)
            for s in range(0, len(rows), _CHUNK):
                part = rows[s : s + _CHUNK]
                self._vindex.add(part, st.vectors[part])
            self._v_upto = stop
        return self._vindex

    def keyword(self) -> Any:
        """The BM25 index, caught up with every row."""
        st = self.store.state
        if self._kindex is None:
            from ..recall.bm25 import BM25Index  # here: every query asks

            self._kindex = BM25Index()
            self._k_upto = 0
        if self._k_upto < st.n_rows:
            stop = st.n_rows
            alive = [r for r in range(self._k_upto, stop) if st.is_alive(r)]
            self._kindex.add_many(alive, [st.text[r] for r in alive])
            self._k_upto = stop
        return self._kindex

    def refresh(self) -> None:
        """After a write: catch up the recall indexes that a recall has built already (the
        others stay unbuilt), and build what the next keyword query reads. Inserting rows
        in order, now or at the next recall, gives the same indexes."""
        if self._kindex is not None:
            self.keyword().prepare()
        if self._vindex is not None:
            self.vector()

    def caught_up(self, semantic: bool) -> tuple[Any, Any]:
        """(keyword index, vector index or None unless ``semantic``), both caught up with
        every row; waits for a writer holding the lock."""
        with self._lock:
            return self.keyword(), self.vector() if semantic else None

    def for_reading(self, semantic: bool) -> tuple[Any, Any]:
        """Like `caught_up` if the lock is free. While a writer holds it, the indexes as they
        are (they miss only the rows being written) rather than wait: reads never queue
        behind a write. Only the first read, before anything is built, waits."""
        if self._lock.acquire(blocking=False):
            try:
                return self.keyword(), self.vector() if semantic else None
            finally:
                self._lock.release()
        if self._kindex is not None and (self._vindex is not None or not semantic):
            return self._kindex, self._vindex if semantic else None
        return self.caught_up(semantic)

    def nearest(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(best cosine, its row) among stored memories for each unit vector (row -1: none).

        Asks the near-duplicate index (`dedup.DupIndex`), never the HNSW index: remembering
        does not wait for hnswlib's insertion. Rows written since the last call are inserted
        first, so the answer covers every stored row.
        """
        st = self.store.state
        m = vectors.shape[0]
        best = np.full(m, -2.0, np.float32)
        best_row = np.full(m, -1, np.int64)
        self._last_codes = None
        if st.n_rows == 0:
            return best, best_row
        dup = self._dup_caught_up()
        codes = dup.codes(vectors)
        dup.best(vectors, codes, st.vectors, best, best_row)
        self._last_codes = codes
        return best, best_row

    def _dup_caught_up(self) -> Any:
        from ..recall.dedup import DupIndex

        st = self.store.state
        if self._dup is None:
            self._dup = DupIndex(st.dim or self._embedding.embedder.dim)
            self._d_upto = 0
        if self._d_upto < st.n_rows:
            rows = self.indexable(self._d_upto, st.n_rows)
            for s in range(0, len(rows), _CHUNK):
                part = rows[s : s + _CHUNK]
                self._dup.insert(part, self._dup.codes(st.vectors[part]))
            self._d_upto = st.n_rows
        return self._dup

    def dup_added(self, rows: list[int], codes_at: list[int], ok: np.ndarray) -> None:
        """New rows just written for the vectors of the last `nearest` call (``codes_at``:
        their positions in it): insert them with the codes already computed."""
        st = self.store.state
        if (self._dup is None or self._last_codes is None or not rows
                or rows[0] != self._d_upto or rows[-1] != st.n_rows - 1
                or len(rows) != rows[-1] - rows[0] + 1):
            return  # not the plain case: the next catch-up hashes them
        keep = np.flatnonzero(ok)  # a fallback (zero) vector is inserted once re-embedded
        at = np.asarray(codes_at, np.int64)[keep]
        self._dup.insert(np.asarray(rows, np.int64)[keep],
                         (self._last_codes[0][at], self._last_codes[1][at]))
        self._d_upto = st.n_rows
        self._last_codes = None

    def forgotten(self, row: int) -> None:
        """Take a forgotten row out of the indexes that already hold it."""
        if self._vindex is not None and row < self._v_upto:
            self._vindex.remove(row)
        if self._kindex is not None and row < self._k_upto:
            self._kindex.remove(row)

    def reembedded(self, row: int, vector: np.ndarray) -> None:
        """Give the vector index a row's new vector (if it has caught up past that row)."""
        if self._vindex is not None and row < self._v_upto:
            self._vindex.add([row], vector[None, :])
        if self._dup is not None and row < self._d_upto:
            unit = np.ascontiguousarray(vector[None, :], np.float32)
            self._dup.insert(np.array([row]), self._dup.codes(unit))

    def stats(self) -> dict[str, int | None]:
        """Sizes of the indexes (None: not built in this process)."""
        return {
            "vector_index": len(self._vindex) if self._vindex is not None else None,
            "keyword_index": len(self._kindex) if self._kindex is not None else None,
        }

    def save(self) -> None:
        """Persist the vector index if it is current (a failure only means a rebuild); never
        for a read-only store (its indexes live in memory only)."""
        if (self._vindex is None or self._v_upto != self.store.state.n_rows
                or self.store.read_only):
            return
        self.path.parent.mkdir(exist_ok=True)
        try:
            self._vindex.save(self.path, last_seq=self.stamp())
        except (OSError, RuntimeError) as exc:
            log.warning("could not save the vector index: %s", exc)
