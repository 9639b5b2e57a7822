"""The near-duplicate index: which stored memory is within ``dedup_threshold`` of a vector.

The quality gate asks this for every remembered item. It used to ask the HNSW index, which
had to be current, so inserting ran at hnswlib's insertion speed (~1.2k memories/s with M 16,
ef_construction 200). Here a separate, cheap structure answers: random-hyperplane LSH (L
tables of b sign bits; a pair at cosine c agrees on one bit with probability 1 − arccos(c)/π)
proposes candidates and their exact cosine decides. Inserting a row is L pointer writes;
hashing is one (m × dim) @ (dim × L·b) product per batch, on one BLAS thread.

With L = 24 tables of b = 14 bits, a stored memory at cosine c to the query is missed with
probability (1 − p^14)^24, p = 1 − arccos(c)/π: 0.2 % at c = 0.95, 0.05 % at 0.96, < 1e-5
from 0.98 (measured on planted duplicates in tests/engines/resonance/test_resonance_dedup.py).
The HNSW lookup it replaces was approximate too. Rows not yet inserted are compared by brute
force, so what was just written is always found.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

__all__ = ["DupIndex", "single_thread_blas"]

TABLES, BITS = 24, 14
_SEED = 0x5EED


def _blas_threads_local() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    libs = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*.so*")
    for path in glob.glob(libs):
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
        return fn
    return None


_SET_LOCAL = _blas_threads_local()


class single_thread_blas:  # a class named as the function it replaces
    """This thread's BLAS calls on one thread: a (512 × 384) product is too small to share,
    and OpenBLAS's spinning workers cost 3–10× on 2 busy cores (measured). A plain context
    manager: every recall and resonance query enters one (a generator-based one cost ~1 µs)."""

    __slots__ = ("_prev",)

    def __enter__(self) -> None:
        self._prev = _SET_LOCAL(1) if _SET_LOCAL is not None else None

    def __exit__(self, *exc: object) -> None:
        if self._prev is not None:
            _SET_LOCAL(self._prev)


class DupIndex:
    """LSH over the rows of a State's vector matrix (row numbers are the ids)."""

    def __init__(self, dim: int, tables: int = TABLES, bits: int = BITS) -> None:
        from ..kernels import dedup as kernels

        self._k = kernels
        self.dim, self.tables, self.bits = dim, tables, bits
        self.planes = np.random.default_rng(_SEED).standard_normal(
            (dim, tables * bits)).astype(np.float32)
        self._weights = (1 << np.arange(bits, dtype=np.int32)).astype(np.int32)
        self.words = (tables * bits + 63) // 64
        # A pair at cosine 0.95 differs in ~10% of the sign bits (sd ~1.6% of 336): 20% is
        # more than 6 sd away, and unrelated rows (~50% apart) are skipped unread.
        self.max_ham = int(0.2 * tables * bits)
        self.sigs = np.zeros((1024, self.words), np.uint64)
        self.heads = np.full((tables, 1 << bits), -1, np.int64)
        self.nxt = np.full((tables, 1024), -1, np.int64)
        self.seen = np.zeros(1024, np.int64)
        self.stamp = 0
        self.count = 0

    def codes(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """((m, tables) int32 bucket codes, (m, words) uint64 packed sign bits) of vectors."""
        with single_thread_blas():
            bits = (vectors @ self.planes) > 0
        codes = bits.reshape(-1, self.tables, self.bits).astype(np.int32) @ self._weights
        packed = np.packbits(bits, axis=1, bitorder="little")
        sig = np.zeros((len(bits), 8 * self.words), np.uint8)
        sig[:, : packed.shape[1]] = packed
        return codes, sig.view(np.uint64)

    def _grow(self, rows: int) -> None:
        cap = self.nxt.shape[1]
        if rows <= cap:
            return
        new = max(rows, 2 * cap)
        nxt = np.full((self.tables, new), -1, np.int64)
        nxt[:, :cap] = self.nxt
        seen = np.zeros(new, np.int64)
        seen[:cap] = self.seen
        sigs = np.zeros((new, self.words), np.uint64)
        sigs[:cap] = self.sigs
        self.nxt, self.seen, self.sigs = nxt, seen, sigs

    def insert(self, rows: np.ndarray, codes: tuple[np.ndarray, np.ndarray]) -> None:
        """Add rows (each once) with their codes (from `codes`)."""
        rows = np.ascontiguousarray(rows, np.int64)
        if not len(rows):
            return
        self._grow(int(rows.max()) + 1)
        self.sigs[rows] = codes[1]
        self._k.lsh_insert(self.heads, self.nxt, np.ascontiguousarray(codes[0], np.int32), rows)
        self.count += len(rows)

    def best(self, queries: np.ndarray, codes: tuple[np.ndarray, np.ndarray],
             vectors: np.ndarray, best: np.ndarray, best_row: np.ndarray) -> None:
        """Raise best / best_row to each query's best candidate among the inserted rows."""
        if self.count == 0:
            return
        self._grow(vectors.shape[0])
        self.stamp = self._k.lsh_best(
            self.heads, self.nxt, self.sigs, np.ascontiguousarray(codes[0], np.int32),
            np.ascontiguousarray(codes[1]), np.ascontiguousarray(queries, np.float32),
            vectors, np.uint64(self.max_ham), self.seen, self.stamp, best, best_row)
