"""The vector index: hnswlib HNSW over cosine similarity, persisted with a staleness stamp.

Ids are the caller's non-negative int64 labels. Saving writes `<path>` (hnswlib's file) and
then `<path>.meta.json` (dimension, parameters, count, the removed ids, the index file's size
and the caller's `last_seq`); the meta file is written last, atomically, so it is the commit
marker: `VectorIndex.read_meta(path)` tells in one small read whether a saved index matches
the store (same `last_seq` and count) or must be rebuilt, and `load()` raises `IndexStale`
for anything missing, torn or mismatched instead of returning a wrong index.

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

import numpy as np

from .errors import ConfigError, IndexError_, IndexStale

__all__ = ["IndexMeta", "IndexParams", "VectorIndex"]

_FORMAT = 1


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
    index_bytes: int  # size of the hnswlib file, to detect a torn pair of files
    removed: tuple[int, ...]
    vector_sum: tuple[float, ...] = ()  # Σ of the live unit vectors (for the centroid)


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


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
        self._live: set[int] = set()
        self._removed: set[int] = set()
        # Σ of live unit vectors, kept exact on add/replace/remove: its direction is the
        # field's centroid, which fusion uses to discount "hub" memories (see fusion.py).
        self._sum = np.zeros(dim, dtype=np.float64)
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
        norms = np.linalg.norm(vecs, axis=1)
        if not np.isfinite(vecs).all() or (norms < 1e-12).any():
            raise IndexError_("refusing zero or non-finite vectors (re-embed them first)")
        unit = vecs / norms[:, None]
        with self._lock:
            replaced = [i for i in ids_arr.tolist() if i in self._live]
            if replaced:
                self._sum -= np.asarray(self._index.get_items(replaced), np.float64).sum(0)
            for i in ids_arr.tolist():
                if i in self._removed:  # a removed label must be unmarked to be updated
                    self._index.unmark_deleted(i)
                    self._removed.discard(i)
            need = self._index.element_count + ids_arr.shape[0]
            if need > self._index.get_max_elements():
                self._index.resize_index(max(need, 2 * self._index.get_max_elements()))
            self._index.add_items(unit, ids_arr, num_threads=1 if len(ids_arr) < 64 else -1)
            self._live.update(ids_arr.tolist())
            self._sum += unit.sum(axis=0, dtype=np.float64)

    def remove(self, doc_id: int) -> bool:
        """Mark `doc_id` deleted (hnswlib keeps its slot; re-adding the id revives it)."""
        with self._lock:
            if doc_id not in self._live:
                return False
            self._sum -= np.asarray(self._index.get_items([doc_id]), np.float64)[0]
            self._index.mark_deleted(doc_id)
            self._live.discard(doc_id)
            self._removed.add(doc_id)
            return True

    # ---- reads ----------------------------------------------------------------------------
    def search(self, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k nearest (ids int64, cosine similarities float32), most similar first."""
        q = np.asarray(vector, dtype=np.float32).reshape(1, self.dim)
        with self._lock:
            k = min(int(k), len(self._live))
            if k <= 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            # hnswlib needs ef >= k to return k results
            if k > self._index.ef:
                self._index.set_ef(k)
            try:
                labels, dists = self._index.knn_query(q, k=k, num_threads=1)
            finally:
                if self._index.ef != self.params.ef:
                    self._index.set_ef(self.params.ef)
        sims = np.clip(1.0 - dists[0], -1.0, 1.0).astype(np.float32)
        return labels[0].astype(np.int64), sims

    def centroid(self) -> np.ndarray:
        """The unit direction of the mean stored vector (zeros when empty)."""
        with self._lock:
            norm = float(np.linalg.norm(self._sum))
            if not self._live or norm < 1e-12:
                return np.zeros(self.dim, dtype=np.float32)
            return (self._sum / norm).astype(np.float32)

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
        cos = np.full(ids_arr.shape[0], np.nan, dtype=np.float32)
        hub = np.full(ids_arr.shape[0], np.nan, dtype=np.float32)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        center = self.centroid()
        with self._lock:
            present = [j for j, i in enumerate(ids_arr.tolist()) if i in self._live]
            if present:
                stored = np.asarray(
                    self._index.get_items(ids_arr[present].tolist()), dtype=np.float32
                )
                cos[present] = stored @ q  # hnswlib stores cosine vectors normalised
                hub[present] = stored @ center
        return cos, hub

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path, *, last_seq: int = 0) -> IndexMeta:
        """Write the index, then its meta file (atomically, as the commit marker)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with self._lock:
            self._index.save_index(str(tmp))
            meta = IndexMeta(
                format=_FORMAT, dim=self.dim, M=self.params.M,
                ef_construction=self.params.ef_construction, ef=self.params.ef,
                count=len(self._live), last_seq=int(last_seq),
                index_bytes=tmp.stat().st_size, removed=tuple(sorted(self._removed)),
                vector_sum=tuple(float(x) for x in self._sum),
            )
        os.replace(tmp, path)
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
            raw = json.loads(_meta_path(path).read_text(encoding="utf-8"))
            raw["removed"] = tuple(raw.get("removed", ()))
            raw["vector_sum"] = tuple(raw.get("vector_sum", ()))
            meta = IndexMeta(**raw)
            if meta.format != _FORMAT or path.stat().st_size != meta.index_bytes:
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
        except RuntimeError as exc:
            raise IndexStale(f"cannot load {path}: {exc}") from exc
        index._index.set_ef(ef)
        index._removed = set(meta.removed)
        index._live = set(index._index.get_ids_list()) - index._removed
        if len(index._live) != meta.count:
            raise IndexStale(f"{path}: {len(index._live)} vectors, meta says {meta.count}")
        if len(meta.vector_sum) == meta.dim:
            index._sum = np.asarray(meta.vector_sum, dtype=np.float64)
        elif index._live:  # an index saved without it: recompute once
            live = sorted(index._live)
            index._sum = np.asarray(index._index.get_items(live), np.float64).sum(axis=0)
        return index
