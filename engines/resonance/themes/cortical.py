"""The cortical index: posting lists over sparse codes, a candidate generator beside HNSW.

Each row (a store row number) is encoded by a `SparseCoder` to `active` feature ids; the
index keeps, per feature, the list of slots whose code holds it. A query is encoded the same
way and scored by *overlap*: how many of its `active` features a row shares, counted over the
query's `active` posting lists by a numba kernel into a counts array that is reused between
queries (one per thread), then a counting selection keeps the best `candidates`.

Overlap is a coarse similarity (integers 0..active, noisy below cosine ~0.5), so the index
is meant to propose candidates that an exact cosine then ranks: `search(..., candidates=C)`
re-ranks the top C by exact cosine using vectors the *caller* provides through
`rerank(vectors_of)` (or `search(vectors_of=...)`). The index does not keep copies of the
vectors: the Field already holds them in its state matrix, and a second copy would cost
1.5 KB per memory. Without `candidates` the result is ranked by overlap alone.

Rows are slots' labels: every add gives the row a new slot (its old slot, if any, becomes a
tombstone), so replacing a row's vector never leaves its old features counting. `remove`
tombstones; `compact()` (and save/load) drops tombstones. Writes take a lock; a query takes
it only to snapshot array references (see kernels/cortical.py for why a concurrent append
is safe to read).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, IndexStale
from .sparse import SparseCoder, SparseCoderParams

__all__ = ["CorticalIndex"]

BLOCK = 64  # postings per pool block: ~6 blocks per list at 100k rows, 4 MB floor
_FORMAT = 1


class _Scratch(threading.local):
    """Per-thread query buffers, grown with the index; never shrunk."""

    counts: np.ndarray = np.zeros(0, np.int32)
    touched: np.ndarray = np.zeros(0, np.int32)
    hist: np.ndarray = np.zeros(0, np.int64)


class CorticalIndex:
    """Sparse-code posting lists: `add` rows, `search` by code overlap (+ exact re-rank)."""

    def __init__(self, coder: SparseCoder) -> None:
        self.coder = coder
        bits = coder.bits
        self._lock = threading.Lock()
        self._head = np.full(bits, -1, np.int32)
        self._tail = np.full(bits, -1, np.int32)
        self._tail_fill = np.zeros(bits, np.int32)
        self._length = np.zeros(bits, np.int64)
        self._pool = np.full((0, BLOCK), -1, np.int32)
        self._nxt = np.zeros(0, np.int32)
        self._n_blocks = 0
        self._slot_row = np.zeros(0, np.int64)
        self._slot_codes = np.zeros((0, coder.active), np.int32)
        self._alive = np.zeros(0, np.uint8)
        self._n_slots = 0
        self._row_slot = np.zeros(0, np.int64)  # row → its live slot, -1 if none
        self._live = 0
        self._scratch = _Scratch()
        self._vectors_of: Callable[[np.ndarray], np.ndarray] | None = None

    def __len__(self) -> int:
        return self._live

    def __contains__(self, row: object) -> bool:
        try:
            r = int(row)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return False
        return 0 <= r < self._row_slot.shape[0] and self._row_slot[r] >= 0

    # ---- writes ---------------------------------------------------------------------------
    def add(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        """Encode `vectors` and index them under `rows` (non-negative ints, the store's row
        numbers). A row already present is replaced. Zero or non-finite vectors have no code
        and are not indexed (a row that had one loses it)."""
        rows_arr = self._check_rows(rows)
        vecs = np.asarray(vectors, dtype=np.float32).reshape(-1, self.coder.dim)
        if vecs.shape[0] != rows_arr.shape[0]:
            raise ConfigError(f"add got {rows_arr.shape[0]} rows but {vecs.shape[0]} vectors")
        if rows_arr.size == 0:
            return
        self.add_codes(rows_arr, self.coder.encode(vecs))

    def add_codes(self, rows: np.ndarray, codes: np.ndarray) -> None:
        """Index precomputed codes (from this index's coder) under `rows`; rows of -1 codes
        are removed rather than indexed."""
        from ..kernels.cortical import posting_append

        rows_arr = self._check_rows(rows)
        codes = np.ascontiguousarray(codes, dtype=np.int32).reshape(-1, self.coder.active)
        if codes.shape[0] != rows_arr.shape[0]:
            raise ConfigError(f"add got {rows_arr.shape[0]} rows but {codes.shape[0]} codes")
        has_code = codes[:, 0] >= 0
        with self._lock:
            self._tombstone(rows_arr)
            rows_arr, codes = rows_arr[has_code], codes[has_code]
            m = rows_arr.shape[0]
            if m == 0:
                return
            self._grow_slots(self._n_slots + m, int(rows_arr.max()) + 1)
            slots = np.arange(self._n_slots, self._n_slots + m, dtype=np.int64)
            self._slot_row[slots] = rows_arr
            self._slot_codes[slots] = codes
            self._alive[slots] = 1
            # a slot is counted only once it is below n_slots, so publish that last
            self._row_slot[rows_arr] = slots
            # worst case of new blocks: each touched bit opens one more than its share
            need = self._n_blocks + m * self.coder.active // BLOCK + min(
                self.coder.bits, m * self.coder.active) + 1
            self._grow_pool(need)
            self._n_blocks = posting_append(
                self._pool, self._nxt, self._head, self._tail, self._tail_fill,
                self._length, codes, slots, self._n_blocks,
            )
            self._n_slots += m
            self._live += m

    def remove(self, rows: np.ndarray) -> None:
        """Tombstone `rows` (unknown rows are ignored); their postings stay until compact()."""
        rows_arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        with self._lock:
            self._tombstone(rows_arr[(rows_arr >= 0) & (rows_arr < self._row_slot.shape[0])])

    def compact(self) -> int:
        """Rebuild the posting lists without tombstones; returns how many were dropped."""
        with self._lock:
            live = np.flatnonzero(self._alive[: self._n_slots])
            dropped = self._n_slots - live.size
            rows, codes = self._slot_row[live].copy(), self._slot_codes[live].copy()
        fresh = CorticalIndex(self.coder)
        fresh.add_codes(rows, codes)
        with self._lock:
            for name in ("_head", "_tail", "_tail_fill", "_length", "_pool", "_nxt",
                         "_n_blocks", "_slot_row", "_slot_codes", "_alive", "_n_slots",
                         "_row_slot", "_live"):
                setattr(self, name, getattr(fresh, name))
        return dropped

    def _check_rows(self, rows: np.ndarray) -> np.ndarray:
        rows_arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows_arr.size and rows_arr.min() < 0:
            raise ConfigError("cortical index rows must be >= 0 (the store's row numbers)")
        if np.unique(rows_arr).size != rows_arr.size:
            raise ConfigError("add got the same row twice in one call")
        return rows_arr

    def _tombstone(self, rows: np.ndarray) -> None:
        rows = rows[rows < self._row_slot.shape[0]]
        old = self._row_slot[rows]
        old = old[old >= 0]
        self._alive[old] = 0
        self._row_slot[rows] = -1
        self._live -= int(old.size)

    def _grow_slots(self, n_slots: int, n_rows: int) -> None:
        # amortised doubling; old arrays stay valid for queries that snapshotted them
        if n_slots > self._alive.shape[0]:
            cap = max(n_slots, 2 * self._alive.shape[0], 1024)
            for name, fill in (("_slot_row", 0), ("_alive", 0)):
                old = getattr(self, name)
                new = np.full(cap, fill, old.dtype)
                new[: old.shape[0]] = old
                setattr(self, name, new)
            codes = np.full((cap, self.coder.active), -1, np.int32)
            codes[: self._slot_codes.shape[0]] = self._slot_codes
            self._slot_codes = codes
        if n_rows > self._row_slot.shape[0]:
            cap = max(n_rows, 2 * self._row_slot.shape[0], 1024)
            new = np.full(cap, -1, np.int64)
            new[: self._row_slot.shape[0]] = self._row_slot
            self._row_slot = new

    def _grow_pool(self, n_blocks: int) -> None:
        if n_blocks <= self._pool.shape[0]:
            return
        cap = max(n_blocks, 2 * self._pool.shape[0], 256)
        pool = np.full((cap, BLOCK), -1, np.int32)
        pool[: self._pool.shape[0]] = self._pool
        nxt = np.full(cap, -1, np.int32)
        nxt[: self._nxt.shape[0]] = self._nxt
        self._pool, self._nxt = pool, nxt

    # ---- reads ----------------------------------------------------------------------------
    def rerank(self, vectors_of: Callable[[np.ndarray], np.ndarray] | None) -> None:
        """Set where exact re-ranking gets vectors: `vectors_of(rows) -> (n, dim)` (e.g.
        ``lambda rows: state.vectors[rows]``); None turns the default source off."""
        self._vectors_of = vectors_of

    def search(
        self, vector: np.ndarray, k: int, *, candidates: int | None = None,
        vectors_of: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best k rows for `vector`, best first.

        Without `candidates`: (rows int64, overlap counts int32), by overlap (ties: the
        earlier-added row first). With `candidates=C` (C >= k): the top C by overlap are
        re-ranked by exact cosine with vectors from `vectors_of` (or the source set by
        `rerank()`): (rows int64, cosine float32). A zero vector finds nothing.
        """
        from ..kernels.cortical import overlap_count, select_top

        k = int(k)
        if k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        c = k if candidates is None else max(int(candidates), k)
        source = vectors_of or self._vectors_of
        if candidates is not None and source is None:
            raise ConfigError(
                "search(candidates=...) re-ranks by exact cosine and needs vectors: call "
                "index.rerank(vectors_of) or pass vectors_of=, or leave candidates=None"
            )
        code = self.coder.encode(q.reshape(1, -1))[0]
        with self._lock:
            pool, nxt, head, fill = self._pool, self._nxt, self._head, self._tail_fill
            alive, n_slots, slot_row = self._alive, self._n_slots, self._slot_row
        empty = (np.zeros(0, np.int64),
                 np.zeros(0, np.int32 if candidates is None else np.float32))
        if code[0] < 0 or n_slots == 0:
            return empty
        sc = self._scratch
        if sc.counts.shape[0] < n_slots:
            cap = max(n_slots, 2 * sc.counts.shape[0], 1024)
            sc.counts = np.zeros(cap, np.int32)
            sc.touched = np.zeros(cap, np.int32)
            sc.hist = np.zeros(self.coder.active + 1, np.int64)
        n_t = overlap_count(pool, nxt, head, fill, code, alive, n_slots, sc.counts, sc.touched)
        out_slots = np.empty(min(c, max(n_t, 1)), np.int64)
        out_counts = np.empty(out_slots.shape[0], np.int32)
        m = select_top(sc.counts, sc.touched, n_t, out_slots.shape[0], out_slots, out_counts,
                       sc.hist)
        rows = slot_row[out_slots[:m]]
        if candidates is None:
            return rows[:k], out_counts[:m][:k]
        vecs = np.asarray(source(rows), dtype=np.float32).reshape(-1, self.coder.dim)  # type: ignore[misc]
        qn = q / max(float(np.linalg.norm(q)), 1e-12)
        norms = np.linalg.norm(vecs, axis=1)
        cos = (vecs @ qn) / np.maximum(norms, 1e-12)
        order = np.argsort(-cos, kind="stable")[:k]
        return rows[order], cos[order].astype(np.float32)

    def codes(self, rows: np.ndarray) -> np.ndarray:
        """The stored codes of `rows` (a row of -1 for rows not in the index)."""
        rows_arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.full((rows_arr.size, self.coder.active), -1, np.int32)
        with self._lock:
            ok = (rows_arr >= 0) & (rows_arr < self._row_slot.shape[0])
            slots = np.full(rows_arr.size, -1, np.int64)
            slots[ok] = self._row_slot[rows_arr[ok]]
            has = slots >= 0
            out[has] = self._slot_codes[slots[has]]
        return out

    def stats(self) -> dict[str, Any]:
        """Counts, posting-list shape (hot features show the embedding's anisotropy) and
        memory in bytes."""
        with self._lock:
            lengths = self._length
            used = lengths[lengths > 0]
            arrays = (self._pool, self._nxt, self._head, self._tail, self._tail_fill,
                      self._length, self._slot_row, self._slot_codes, self._alive,
                      self._row_slot)
            return {
                "rows": self._live,
                "slots": self._n_slots,
                "tombstones": self._n_slots - self._live,
                "bits": self.coder.bits,
                "active": self.coder.active,
                "postings": int(lengths.sum()),
                "features_used": int(used.size),
                "posting_mean": float(used.mean()) if used.size else 0.0,
                "posting_max": int(used.max()) if used.size else 0,
                "blocks": self._n_blocks,
                "bytes": int(sum(a.nbytes for a in arrays)),
            }

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write rows, codes and the coder's parameters to `path` (npz), atomically: a
        temporary file, fsync, rename. Postings are rebuilt from the codes on load."""
        path = Path(path)
        with self._lock:
            live = np.flatnonzero(self._alive[: self._n_slots])
            rows, codes = self._slot_row[live].copy(), self._slot_codes[live].copy()
        p = self.coder.params
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, format=np.int64(_FORMAT), rows=rows, codes=codes,
                     coder=np.array([p.dim, p.bits, p.active, p.seed, p.rounds], np.int64),
                     projection=np.array(p.projection))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, coder: SparseCoder) -> CorticalIndex:
        """Load a saved index; `IndexStale` if the file is missing, unreadable, or was
        written with a different coder (then rebuild it from the store's vectors)."""
        path = Path(path)
        try:
            with np.load(path) as z:
                fmt = int(z["format"])
                rows, codes = z["rows"], z["codes"]
                dim, bits, active, seed, rounds = (int(v) for v in z["coder"])
                projection = str(z["projection"])
        except (OSError, ValueError, KeyError) as exc:
            raise IndexStale(f"cannot load the cortical index {path}: {exc}") from exc
        saved = SparseCoderParams(dim, bits, active, seed, projection, rounds)
        if fmt != _FORMAT or saved != coder.params:
            raise IndexStale(
                f"{path} was written by {asdict(saved)} (format {fmt}); this coder is "
                f"{asdict(coder.params)}: rebuild the index from the vectors"
            )
        index = cls(coder)
        index.add_codes(rows, codes)
        return index
