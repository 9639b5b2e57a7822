"""The BM25 index's append buffer: the postings of the documents added since the last merge.

Flat arrays grown by doubling (a document costs O(its distinct terms), amortised), so the
buffer's CSR is one kernel call over slices, not one array per buffered document. The buffer
numbers the terms it holds densely, in the order it first met them (a *local* id): its CSR
is as wide as the terms it holds, not as the whole vocabulary. Slots are consecutive: the
buffer holds the slots ``first .. first + n_docs - 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["AppendBuffer", "DenseIds", "grow"]

_KERNEL: Any = None


def _dense_values() -> Any:
    """kernels/fusion.py's `dense_values`, imported on first use (numba loads with a query)."""
    global _KERNEL
    if _KERNEL is None:
        from ..kernels.fusion import dense_values as _KERNEL
    return _KERNEL


def grow(arr: np.ndarray, need: int, fill: int = 0) -> np.ndarray:
    """A copy with capacity >= need (doubling; the new places hold ``fill``), so arrays
    handed out earlier stay as they were; ``arr`` itself when it holds ``need`` already.
    (The engine's row-aligned tables grow through it too.)"""
    if need <= arr.shape[0]:
        return arr
    new = np.full(max(need, 2 * arr.shape[0], 64), fill, dtype=arr.dtype)
    new[: arr.shape[0]] = arr
    return new



class DenseIds:
    """A map from non-negative int ids to int64 values (-1: none) kept as one array while the
    ids are dense (a field's ids are its store rows), so a query reads a few hundred ids with
    one gather instead of a dict look-up each. Dropped for good once an id lands far past the
    entries held (sparse ids: the owner keeps to its dict). Writers hold the owner's lock;
    `get` reads without it: an array grown meanwhile is a new one, the old one unchanged."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: np.ndarray | None = np.full(0, -1, np.int64)

    def set(self, ids: np.ndarray, values: np.ndarray | int, held: int) -> None:
        """``ids`` map to ``values``; ``held``: how many entries the owner holds (the bound
        past which an id is too far to keep the array for)."""
        arr = self.values
        if arr is None or not ids.shape[0]:
            return
        top = int(ids.max()) + 1
        if int(ids.min()) < 0 or top > max(arr.shape[0], 8 * held + 4096):
            self.values = None  # a negative id (numpy would index from the end) or one far off
            return
        if top > arr.shape[0]:
            arr = self.values = grow(arr, top, -1)
        arr[ids] = values

    def drop(self, doc_id: int) -> None:
        """``doc_id`` maps to nothing now."""
        if self.values is not None and 0 <= doc_id < self.values.shape[0]:
            self.values[doc_id] = -1

    def get(self, ids: np.ndarray) -> np.ndarray | None:
        """The value of each of ``ids`` (int64, -1 for none); None when the array cannot
        answer (dropped, or an id outside it): ask the dict."""
        arr = self.values
        if arr is None:
            return None
        out = np.empty(ids.shape[0], np.int64)
        if not ids.shape[0]:
            return out
        # the bounds check and the gather: one kernel call, not min, max and a gather
        return out if _dense_values()(arr, np.ascontiguousarray(ids, np.int64), out) else None

class AppendBuffer:
    """Postings (term, local term, doc slot, tf) of the documents appended since a merge."""

    __slots__ = ("_docs", "_first", "_local", "_local_terms", "_n", "_starts", "_terms",
                 "_tfs", "n_docs", "n_local")

    def __init__(self) -> None:
        self._terms = np.zeros(0, np.int32)
        self._local_terms = np.zeros(0, np.int32)
        self._docs = np.zeros(0, np.int32)
        self._tfs = np.zeros(0, np.float32)
        self._n = 0  # postings held
        self._starts: list[int] = []  # first posting of each document
        self._first = 0  # slot of the first document
        self._local = np.zeros(0, np.int32)  # term id → local id + 1 (0: not held)
        self.n_docs = 0
        self.n_local = 0

    def append(self, slot: int, terms: np.ndarray, tfs: np.ndarray) -> None:
        """Add a document's distinct ``terms`` (int32) and their ``tfs``; ``slot`` is the
        next slot after the last appended one."""
        if not self.n_docs:
            self._first = slot
        lo, hi = self._n, self._n + terms.shape[0]
        if hi > self._terms.shape[0]:
            self._terms, self._local_terms = grow(self._terms, hi), grow(self._local_terms, hi)
            self._docs, self._tfs = grow(self._docs, hi), grow(self._tfs, hi)
        if terms.shape[0]:
            top = int(terms.max()) + 1
            if top > self._local.shape[0]:
                self._local = grow(self._local, top)
            local = self._local[terms]
            new = terms[local == 0]  # distinct: a document's terms are
            if new.shape[0]:
                self._local[new] = np.arange(self.n_local + 1, self.n_local + 1 + new.shape[0])
                self.n_local += new.shape[0]
                local = self._local[terms]
            self._local_terms[lo:hi] = local - 1
        self._terms[lo:hi] = terms
        self._docs[lo:hi] = slot
        self._tfs[lo:hi] = tfs
        self._starts.append(lo)
        self._n = hi
        self.n_docs += 1

    def postings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term ids, doc slots, tfs) of every buffered posting, in the order appended."""
        n = self._n
        return self._terms[:n], self._docs[:n], self._tfs[:n]

    def local_terms(self) -> np.ndarray:
        """The local term id of every buffered posting (aligned with `postings`)."""
        return self._local_terms[: self._n]

    def local_ids(self, terms: np.ndarray) -> np.ndarray:
        """The local id of each term id (int32; -1: the buffer holds no posting of it)."""
        # a query's few terms: looked up one by one, not by four numpy calls over them
        local = self._local
        size = local.shape[0]
        return np.array([local[t] - 1 if t < size else -1 for t in terms.tolist()], np.int32)

    def terms_of(self, slot: int) -> np.ndarray | None:
        """The distinct term ids of a buffered slot; None if the slot is not buffered."""
        i = slot - self._first
        if not 0 <= i < self.n_docs:
            return None
        hi = self._starts[i + 1] if i + 1 < self.n_docs else self._n
        return self._terms[self._starts[i] : hi]
