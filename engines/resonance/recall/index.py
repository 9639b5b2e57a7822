"""The vector index: hnswlib HNSW over cosine similarity, persisted with a staleness stamp.

Ids are the caller's non-negative int64 labels. The unit vectors are also kept in a plain
float32 matrix (id → row): fusion needs the exact cosine of up to 200 candidates per query,
and hnswlib's get_items costs ~10 µs per item where a numpy gather costs ~0.1 µs. Saving
writes `<path>` (hnswlib's file), `<path>.vectors.npz` (ids, vectors, live mask) and then
`<path>.meta.json` (dimension, parameters, count, the caller's `last_seq`, both files'
sizes); the meta file is written last, atomically, so it is the commit marker:
`VectorIndex.read_meta(path)` tells in one small read whether a saved index matches the store
(same `last_seq` and count) or must be rebuilt, and `load()` raises `IndexStale` for anything
missing, torn or mismatched instead of returning a wrong index.

Up to `EXACT_UP_TO` live vectors a query scans them all instead of walking the graph: a
field of a few thousand memories is answered exactly, and up to ~2k in half the time
(hnswlib at k = 100 visits much of a small graph anyway, with a heap and scattered reads,
and misses a few of the true nearest: benchmarks/exact_nearest.py). Past it, the walk wins.

One lock serialises writes, resizes and queries: hnswlib's resize is not safe against a
concurrent query, and a 100k-vector query costs ~0.1–0.3 ms, far below lock contention.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, IndexStale, SearchIndexError
from .postings import DenseIds, grow

__all__ = ["IndexMeta", "IndexParams", "VectorIndex"]

_FORMAT = 2
# live vectors up to which a query scans them all (exact) instead of walking HNSW's graph: at
# k = 100 the scan takes half the walk's time up to ~2k 384-d vectors and as long at ~4k warm,
# still less with cold caches (benchmarks/exact_nearest.py; docs/memory.md); a scan's reads
# grow with the field, a walk's barely
EXACT_UP_TO = 4096
_KERNELS: dict[str, Any] = {}  # kernels/fusion.py's `nearest_rows` and `row_signals`, imported at first use


def _kernel(name: str) -> Any:
    kernel = _KERNELS.get(name)
    if kernel is None:
        from ..kernels import fusion

        kernel = _KERNELS[name] = getattr(fusion, name)
    return kernel


@dataclass(frozen=True)
class IndexParams:
    """HNSW parameters: M (links per node), ef_construction (build beam), ef (query beam)."""

    M: int = 16
    ef_construction: int = 200
    ef: int = 64  # recall at k=10 is ~0.99 on 384-d data from 64 up
    initial_capacity: int = 1024

    def __post_init__(self) -> None:
        if self.M < 2 or self.ef_construction < 1 or self.ef < 1 or self.initial_capacity < 1:
            raise ConfigError(f"invalid HNSW parameters: {self}")


@dataclass(frozen=True)
class IndexMeta:
    """What `<path>.meta.json` records about a saved index."""

    format: int
    dim: int
    M: int
    ef_construction: int
    ef: int
    count: int  # live vectors
    last_seq: int  # the caller's stamp (e.g. the store's last applied sequence number)
    index_bytes: int  # sizes of the two data files, to detect a torn set of files
    vectors_bytes: int


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def _vectors_path(path: Path) -> Path:
    return path.with_name(path.name + ".vectors.npz")


class VectorIndex:
    """An HNSW cosine index from int ids to unit vectors; grows by doubling."""

    def __init__(
        self, dim: int, params: IndexParams | None = None, *, _init: bool = True
    ) -> None:
        import hnswlib  # lazily: importing the engine must not load it

        if dim < 1:
            raise ConfigError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.params = params or IndexParams()
        self._index = hnswlib.Index(space="cosine", dim=dim)
        if _init:  # load() fills the index from a file instead
            self._index.init_index(
                max_elements=self.params.initial_capacity, M=self.params.M,
                ef_construction=self.params.ef_construction, allow_replace_deleted=True,
            )
            self._index.set_ef(self.params.ef)
        self._row_of: dict[int, int] = {}  # every id ever added → its row in _vecs
        self._row_ids = np.zeros(0, dtype=np.int64)
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self._alive = np.zeros(0, dtype=np.uint8)  # row -> 1 while its id is live (the scan's mask)
        self._n_rows = 0
        self._live: set[int] = set()
        # id -> its row in _vecs while live, -1 otherwise: `signals` reads a few hundred ids
        # a query with one numpy gather instead of a set and a dict look-up each. Kept while
        # the ids are dense (the field's are its store rows); None once one is not.
        self._dense = DenseIds()
        # Σ of live unit vectors, kept exact on add/replace/remove: its direction is the
        # field's centroid, which fusion uses to discount "hub" memories (see fusion.py).
        self._sum = np.zeros(dim, dtype=np.float64)
        self._sum_version = 0  # counts the changes of _sum: a centroid is kept for one
        self._centroid: tuple[int, np.ndarray] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._live

    # ---- writes ---------------------------------------------------------------------------
    def add(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        """Insert or replace vectors. Zero vectors (embedder fallbacks) are refused: their
        cosine is undefined; the caller indexes them once re-embedded."""
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if ids_arr.shape[0] != vecs.shape[0]:
            raise ConfigError(f"add got {ids_arr.shape[0]} ids but {vecs.shape[0]} vectors")
        if ids_arr.size == 0:
            return
        if (ids_arr < 0).any():
            raise ConfigError("vector ids must be >= 0")
        if len(np.unique(ids_arr)) != ids_arr.shape[0]:
            raise ConfigError("add got the same id twice in one call")
        norms = np.linalg.norm(vecs, axis=1)
        if not np.isfinite(vecs).all() or (norms < 1e-12).any():
            raise SearchIndexError("refusing zero or non-finite vectors (re-embed them first)")
        unit = vecs / norms[:, None]
        with self._lock:
            rows = np.empty(ids_arr.shape[0], dtype=np.int64)
            for j, i in enumerate(ids_arr.tolist()):
                row = self._row_of.get(i)
                if row is None:
                    row = self._row_of[i] = self._n_rows
                    self._n_rows += 1
                elif i in self._live:  # replaced: its old vector leaves the sum
                    self._sum -= self._vecs[row]
                else:  # removed earlier: hnswlib must unmark it before an update
                    self._index.unmark_deleted(i)
                rows[j] = row
            if self._n_rows > self._vecs.shape[0]:
                cap = max(self._n_rows, 2 * self._vecs.shape[0], 64)
                grown = np.zeros((cap, self.dim), dtype=np.float32)
                grown[: self._vecs.shape[0]] = self._vecs
                ids_grown = np.zeros(cap, dtype=np.int64)
                ids_grown[: self._row_ids.shape[0]] = self._row_ids
                self._vecs, self._row_ids = grown, ids_grown
                self._alive = grow(self._alive, cap, 0)
            self._vecs[rows] = unit
            self._alive[rows] = 1
            self._row_ids[rows] = ids_arr
            need = self._index.element_count + ids_arr.shape[0]
            if need > self._index.get_max_elements():
                self._index.resize_index(max(need, 2 * self._index.get_max_elements()))
            self._index.add_items(unit, ids_arr, num_threads=1 if len(ids_arr) < 64 else -1)
            self._live.update(ids_arr.tolist())
            self._dense.set(ids_arr, rows, self._n_rows)
            self._sum += unit.sum(axis=0, dtype=np.float64)
            self._sum_version += 1

    def remove(self, doc_id: int) -> bool:
        """Mark `doc_id` deleted (hnswlib keeps its slot; re-adding the id revives it)."""
        with self._lock:
            if doc_id not in self._live:
                return False
            row = self._row_of[doc_id]
            self._sum -= self._vecs[row]
            self._sum_version += 1
            self._index.mark_deleted(doc_id)
            self._alive[row] = 0
            self._live.discard(doc_id)
            self._dense.drop(doc_id)
            return True

    # ---- reads ----------------------------------------------------------------------------
    def search(self, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k nearest (ids int64, cosine similarities float32), most similar first."""
        q = np.asarray(vector, dtype=np.float32).reshape(1, self.dim)
        with self._lock:
            live = len(self._live)
            k = min(int(k), live)
            if k <= 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            if live <= EXACT_UP_TO:
                return self._exact(q[0], k)
            # hnswlib needs ef >= k to return k results; between queries its ef is params.ef
            # (set at creation and load, put back here), so no call asks it
            ef = self.params.ef
            if k > ef:
                self._index.set_ef(k)
            try:
                labels, dists = self._index.knn_query(q, k=k, num_threads=1)
            except RuntimeError:
                # hnswlib's graph may reach fewer than k live items (a small field, many
                # deletions: "Cannot return the results in a contiguous 2D array"); an exact
                # scan of the live vectors is cheap exactly when that happens.
                return self._exact(q[0], k)
            finally:
                if k > ef:
                    self._index.set_ef(ef)
        # np.clip's values (NaN stays NaN), without its dispatch
        sims = np.minimum(np.maximum(1.0 - dists[0], -1.0), 1.0).astype(np.float32, copy=False)
        return labels[0].astype(np.int64), sims

    def _exact(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k nearest live ids by a scan of every row (the caller holds the lock; 1 <= k
        <= live ids): most similar first, ties by id."""
        unit = (q / max(float(np.sqrt(q.dot(q))), 1e-12)).astype(np.float32, copy=False)
        ids, sims = np.empty(k, np.int64), np.empty(k, np.float32)
        m = _kernel("nearest_rows")(self._vecs, self._alive, np.ascontiguousarray(unit),
                                    self._n_rows, self._row_ids, k, ids, sims)
        return ids[:m], sims[:m]

    def centroid(self) -> np.ndarray:
        """The unit direction of the mean stored vector (zeros when empty)."""
        return self._unit_centroid().copy()

    def _unit_centroid(self) -> np.ndarray:
        """`centroid`, computed once per change of the stored vectors (do not modify it)."""
        version, kept = self._sum_version, self._centroid
        if kept is not None and kept[0] == version:
            return kept[1]
        norm = float(np.sqrt(self._sum.dot(self._sum)))  # np.linalg.norm's arithmetic, undispatched
        if not self._live or norm < 1e-12:
            c = np.zeros(self.dim, dtype=np.float32)
        else:
            c = (self._sum / norm).astype(np.float32)
        self._centroid = (version, c)
        return c

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored unit vectors of `ids` (zero rows for ids not in the index)."""
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        out = np.zeros((ids_arr.shape[0], self.dim), dtype=np.float32)
        with self._lock:
            live, row_of = self._live, self._row_of
            pairs = [(j, row_of[i]) for j, i in enumerate(ids_arr.tolist()) if i in live]
            if pairs:
                js, rows = zip(*pairs, strict=True)
                out[list(js)] = self._vecs[list(rows)]
        return out

    def similarities(
        self, vector: np.ndarray, ids: Sequence[int] | np.ndarray
    ) -> np.ndarray:
        """Exact cosine of `vector` with each stored id (NaN for ids not in the index)."""
        return self.signals(vector, ids)[0]

    def signals(
        self, vector: np.ndarray, ids: Sequence[int] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(cosine with `vector`, cosine with the centroid) of each id; NaN where absent.

        The second is the id's "hubness": how much it looks like every other memory.
        """
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        n = ids_arr.shape[0]
        cosine, hub = np.empty(n, np.float32), np.empty(n, np.float32)
        if not n:
            return cosine, hub
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        unit = q / max(float(np.sqrt(q.dot(q))), 1e-12)  # np.linalg.norm(q), undispatched
        centroid = self._unit_centroid()
        with self._lock:
            rows = self._dense.get(ids_arr)  # -1 where not live
            if rows is None:
                live, row_of = self._live, self._row_of
                rows = np.array([row_of[i] if i in live else -1 for i in ids_arr.tolist()], np.int64)
            _kernel("row_signals")(self._vecs, rows, np.ascontiguousarray(unit, np.float32), centroid,
                                   cosine, hub)
        return cosine, hub

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path, *, last_seq: int = 0) -> IndexMeta:
        """Write the index and its vectors, then the meta file (atomically, the commit
        marker)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        vtmp = path.with_name(path.name + ".vectors.tmp.npz")
        with self._lock:
            self._index.save_index(str(tmp))
            n = self._n_rows
            live = self._alive[:n].astype(bool)
            np.savez(vtmp, ids=self._row_ids[:n], vecs=self._vecs[:n], live=live)
            meta = IndexMeta(
                format=_FORMAT, dim=self.dim, M=self.params.M,
                ef_construction=self.params.ef_construction, ef=self.params.ef,
                count=len(self._live), last_seq=int(last_seq),
                index_bytes=tmp.stat().st_size, vectors_bytes=vtmp.stat().st_size,
            )
        os.replace(tmp, path)
        os.replace(vtmp, _vectors_path(path))
        mtmp = path.with_name(path.name + ".meta.tmp")
        with open(mtmp, "w", encoding="utf-8") as fh:
            json.dump(asdict(meta), fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(mtmp, _meta_path(path))
        return meta

    @staticmethod
    def read_meta(path: str | Path) -> IndexMeta | None:
        """The saved meta, or None if missing/unreadable/torn (→ rebuild). Cheap."""
        path = Path(path)
        try:
            meta = IndexMeta(**json.loads(_meta_path(path).read_text(encoding="utf-8")))
            if (meta.format != _FORMAT or path.stat().st_size != meta.index_bytes
                    or _vectors_path(path).stat().st_size != meta.vectors_bytes):
                return None
            return meta
        except (OSError, ValueError, TypeError):
            return None

    @classmethod
    def load(
        cls, path: str | Path, *, expect_seq: int | None = None,
        expect_count: int | None = None, params: IndexParams | None = None,
    ) -> VectorIndex:
        """Load a saved index; IndexStale if it is missing, torn, or not at the expected
        `last_seq`/count. `params` may change ef (M and ef_construction are fixed by the file).
        """
        path = Path(path)
        meta = cls.read_meta(path)
        if meta is None:
            raise IndexStale(f"no valid saved index at {path} (missing, torn or old format)")
        if expect_seq is not None and meta.last_seq != expect_seq:
            raise IndexStale(f"{path} is at seq {meta.last_seq}, the store at {expect_seq}")
        if expect_count is not None and meta.count != expect_count:
            raise IndexStale(f"{path} holds {meta.count} vectors, the store {expect_count}")
        ef = params.ef if params else meta.ef
        index = cls(
            meta.dim, IndexParams(M=meta.M, ef_construction=meta.ef_construction, ef=ef),
            _init=False,
        )
        try:
            index._index.load_index(str(path), allow_replace_deleted=True)
            with np.load(_vectors_path(path)) as z:
                ids, vecs, live = z["ids"], z["vecs"], z["live"]
        except (RuntimeError, OSError, ValueError, KeyError) as exc:
            raise IndexStale(f"cannot load {path}: {exc}") from exc
        index._index.set_ef(ef)
        index._row_ids, index._vecs, index._n_rows = ids.astype(np.int64), vecs, len(ids)
        index._alive = live.astype(np.uint8)
        index._row_of = {int(i): r for r, i in enumerate(ids.tolist())}
        index._live = set(ids[live].tolist())
        index._dense.set(ids[live].astype(np.int64), np.flatnonzero(live), len(ids))
        index._sum = vecs[live].sum(axis=0, dtype=np.float64)
        if len(index._live) != meta.count:
            raise IndexStale(f"{path}: {len(index._live)} vectors, meta says {meta.count}")
        return index
