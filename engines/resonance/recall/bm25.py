"""The keyword index: BM25 (k1 = 1.2, b = 0.75) over an inverted index in flat arrays.

Layout: a *main* CSR (postings grouped by term) plus an *append buffer* of the documents
added since the last merge. Adds go to the buffer (O(tokens), no rebuild): its postings are
flat arrays that grow by doubling, and its terms are numbered densely in the order the buffer
first met them (a "local" id). A query scores the main CSR and a small CSR of the buffer over
those local ids (one kernel call, O(buffered postings + terms the buffer holds), built on the
first query after a write) into the same score array; when the buffer passes `merge_every`
documents it is merged into the main CSR by a linear counting-sort kernel that also drops
removed documents. So a conversation, which writes a memory between two queries, pays for
what the buffer holds, never for the whole vocabulary or one array per buffered document.
Statistics (N, avgdl, df) are always exact: df is updated on add and remove, not at merge
time.

Reads take the lock only to copy array references (a read view); the kernels run outside it
(numba `nogil`), so concurrent queries do not serialise on each other.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from ..kernels.bm25 import bm25_accumulate, csr_merge, gather_slots
from ..kernels.bm25 import search as search_kernel
from .postings import AppendBuffer, DenseIds, grow
from .text import DEFAULT_TEXT, TextConfig, tokenize

__all__ = ["BM25Index", "BM25Params", "KeywordResult"]

_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_F32 = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class BM25Params:
    """BM25 constants. k1: term-frequency saturation; b: length normalisation strength."""

    k1: float = 1.2
    b: float = 0.75
    merge_every: int = 1024  # buffered docs before a merge into the main CSR

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0.0 <= self.b <= 1.0 or self.merge_every < 1:
            raise ConfigError(
                f"BM25Params needs k1 >= 0, 0 <= b <= 1, merge_every >= 1; "
                f"got k1={self.k1}, b={self.b}, merge_every={self.merge_every}"
            )


@dataclass(frozen=True)
class _ReadView:
    """Array references a query needs; valid even if the index changes meanwhile. Made once
    per version of the index (every write drops it), not once per query."""

    main: tuple[np.ndarray, np.ndarray, np.ndarray]
    delta: tuple[np.ndarray, np.ndarray, np.ndarray]  # the buffer's CSR, by local term id
    doc_len: np.ndarray
    alive: np.ndarray
    slot_ids: np.ndarray
    n_slots: int
    avgdl: float
    n_alive: int  # N of the idf


class _Scored(NamedTuple):
    scores: np.ndarray
    matched: np.ndarray
    touched: np.ndarray
    n: int
    view: _ReadView
    total: float  # Σ query weights (idf · count)


@dataclass(frozen=True)
class KeywordResult:
    """A keyword search: the top hits and the signals of requested extra ids.

    `coverage` is the share of the query's idf mass a document contains (0..1): 1 when it
    holds every query term, whatever their frequencies.
    """

    ids: np.ndarray  # int64, best first
    scores: np.ndarray  # float32 BM25
    coverage: np.ndarray  # float32
    extra_scores: np.ndarray  # float32, aligned with the extra ids (0 when absent)
    extra_coverage: np.ndarray  # float32


class BM25Index:
    """An incremental BM25 index from integer doc ids to texts.

    >>> idx = BM25Index(); idx.add(1, "the cat sat"); idx.add(2, "a dog ran")
    >>> idx.top_k("cats", 5)[0].tolist()
    [1]
    """

    def __init__(self, params: BM25Params | None = None, text: TextConfig = DEFAULT_TEXT) -> None:
        self.params = params or BM25Params()
        self.text = text
        self._lock = threading.RLock()
        self._vocab: dict[str, int] = {}
        self._df = np.zeros(0, dtype=np.int32)
        self._slot_of: dict[int, int] = {}
        self._slot_dense = DenseIds()  # the same map as an array, while the ids are dense
        self._slot_ids = np.zeros(0, dtype=np.int64)
        self._doc_len = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=np.uint8)
        self._n_slots = 0
        self._n_alive = 0
        self._total_len = 0.0
        self._main = (np.zeros(1, dtype=np.int64), _EMPTY_I32, _EMPTY_F32)
        self._buf = AppendBuffer()  # the documents added since the last merge
        self._buf_csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._view: _ReadView | None = None  # what queries read, until the next write
        self._k1, self._b = np.float32(self.params.k1), np.float32(self.params.b)
        self._main_has_dead = False  # removed docs still have postings in the main CSR

    # ---- size -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n_alive

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot_of

    @property
    def vocabulary_size(self) -> int:
        """Distinct terms seen (including terms of removed documents)."""
        return len(self._vocab)

    # ---- writes ---------------------------------------------------------------------------
    def add(self, doc_id: int, text: str) -> None:
        """Index `text` under `doc_id`; an id already present is replaced."""
        self.add_many([doc_id], [text])

    def add_many(self, ids: Sequence[int] | np.ndarray, texts: Iterable[str]) -> None:
        """Index many documents; one merge at most, at the end."""
        ids = [int(i) for i in ids]
        texts = list(texts)
        if len(ids) != len(texts):
            raise ConfigError(f"add_many got {len(ids)} ids but {len(texts)} texts")
        tokenized = [tokenize(t, self.text) for t in texts]  # outside the lock: pure Python
        with self._lock:
            need = self._n_slots + len(ids)
            self._slot_ids = grow(self._slot_ids, need)
            self._doc_len = grow(self._doc_len, need)
            self._alive = grow(self._alive, need)
            for doc_id, tokens in zip(ids, tokenized, strict=True):
                if doc_id in self._slot_of:
                    self._remove_locked(doc_id)
                self._append_locked(doc_id, tokens)
            self._buf_csr = self._view = None
            if self._buf.n_docs >= self.params.merge_every:
                self._merge_locked()

    def remove(self, doc_id: int) -> bool:
        """Forget `doc_id`; returns False if it was not indexed."""
        with self._lock:
            if doc_id not in self._slot_of:
                return False
            self._remove_locked(doc_id)
            return True

    def merge(self) -> None:
        """Fold the append buffer into the main CSR now (queries do it lazily otherwise)."""
        with self._lock:
            self._merge_locked()

    def prepare(self) -> None:
        """Build now what the next query reads (the read view and the buffer's CSR), which
        the first query after a write would otherwise build: a writer calls it so that
        queries in another thread find it ready."""
        with self._lock:
            if self._view is None:
                self._view = self._read_view()

    def _append_locked(self, doc_id: int, tokens: list[str]) -> None:
        counts = Counter(tokens)
        vocab = self._vocab
        terms = np.empty(len(counts), dtype=np.int32)
        tfs = np.empty(len(counts), dtype=np.float32)
        for i, (tok, c) in enumerate(counts.items()):
            t = vocab.get(tok)
            if t is None:
                t = vocab[tok] = len(vocab)
            terms[i] = t
            tfs[i] = c
        if len(vocab) > self._df.shape[0]:
            self._df = grow(self._df, len(vocab))
        np.add.at(self._df, terms, 1)
        slot = self._n_slots
        self._n_slots += 1
        self._slot_of[doc_id] = slot
        self._slot_dense.set(np.array([doc_id], np.int64), slot, self._n_slots)
        self._slot_ids[slot] = doc_id
        self._doc_len[slot] = len(tokens)
        self._alive[slot] = 1
        self._n_alive += 1
        self._total_len += len(tokens)
        self._buf.append(slot, terms, tfs)

    def _remove_locked(self, doc_id: int) -> None:
        slot = self._slot_of.pop(doc_id)
        self._slot_dense.drop(doc_id)
        terms, in_main = self._terms_of_slot(slot)
        self._df[terms] -= 1
        self._main_has_dead |= in_main
        self._alive[slot] = 0
        self._n_alive -= 1
        self._total_len -= float(self._doc_len[slot])
        self._buf_csr = self._view = None

    def _terms_of_slot(self, slot: int) -> tuple[np.ndarray, bool]:
        """The distinct term ids of a slot (from the buffer, else a scan of the main CSR),
        and whether they came from the main CSR.

        The scan is O(postings) (~1 ms at 100k docs); removal is rare (forget), so no
        forward index is kept for it.
        """
        terms = self._buf.terms_of(slot)
        if terms is not None:
            return terms, False
        offsets, docs, _ = self._main
        where = np.flatnonzero(docs == slot)
        return (np.searchsorted(offsets, where, side="right") - 1).astype(np.int32), True

    def _merge_locked(self) -> None:
        if not self._buf.n_docs and not self._main_has_dead:
            return
        terms, docs, tfs = self._buf.postings()
        offsets, pdocs, ptf = self._main
        self._main = csr_merge(
            offsets, pdocs, ptf, terms, docs, tfs, len(self._vocab), self._alive
        )
        self._buf = AppendBuffer()
        self._buf_csr = self._view = None
        self._main_has_dead = False

    # ---- reads ----------------------------------------------------------------------------
    def _query_terms(self, query: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, _ReadView]:
        """Query term ids, their local ids in the view's buffer CSR (-1: not in it), their
        weights (idf · count), and a read view to score against."""
        counts: dict[str, int] = {}  # a Counter's counts and order, without its set-up
        for tok in tokenize(query, self.text):
            counts[tok] = counts.get(tok, 0) + 1
        with self._lock:
            view = self._view
            if view is None:
                view = self._view = self._read_view()
            n = view.n_alive
            vocab, df_of = self._vocab, self._df
            ids: list[int] = []
            weights: list[float] = []
            for tok, c in counts.items():
                t = vocab.get(tok)
                if t is None:
                    continue
                df = df_of[t]
                if df <= 0:
                    continue
                df = float(df)
                ids.append(t)
                weights.append(c * np.log1p((n - df + 0.5) / (df + 0.5)))
            q_terms = np.asarray(ids, np.int32)
            q_local = self._buf.local_ids(q_terms)  # as the view's buffer CSR numbers them
        return q_terms, q_local, np.asarray(weights, np.float32), view

    def _read_view(self) -> _ReadView:
        """The index as queries read it now (the caller holds the lock)."""
        buf = self._buf
        if buf.n_docs and self._buf_csr is None:
            _, docs, tfs = buf.postings()
            empty = np.zeros(1, dtype=np.int64)
            self._buf_csr = csr_merge(
                empty, _EMPTY_I32, _EMPTY_F32, buf.local_terms(), docs, tfs, buf.n_local,
                self._alive,
            )
        n = self._n_alive
        empty_csr = (np.zeros(1, dtype=np.int64), _EMPTY_I32, _EMPTY_F32)
        return _ReadView(
            main=self._main,
            delta=self._buf_csr if buf.n_docs else empty_csr,
            doc_len=self._doc_len,
            alive=self._alive,
            slot_ids=self._slot_ids,
            n_slots=self._n_slots,
            avgdl=self._total_len / n if n else 1.0,
            n_alive=n,
        )

    def _score(self, query: str) -> _Scored:
        """Dense slot scores and matched query weight, the touched slots, the read view."""
        q_terms, q_local, q_weights, view = self._query_terms(query)
        size = max(view.n_slots, 1)
        scores = np.zeros(size, dtype=np.float32)
        matched = np.zeros(size, dtype=np.float32)
        touched = np.empty(size, dtype=np.int32)
        n = 0
        if q_terms.shape[0]:
            k1, b = self._k1, self._b
            avg = np.float32(view.avgdl or 1.0)
            for (offsets, docs, tfs), terms in ((view.main, q_terms), (view.delta, q_local)):
                if docs.shape[0]:
                    n = bm25_accumulate(
                        offsets, docs, tfs, view.doc_len, view.alive, terms, q_weights,
                        k1, b, avg, scores, matched, touched, n,
                    )
        total = float(q_weights.sum())
        return _Scored(scores, matched, touched, n, view, total)

    def top_k(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best (ids int64, scores float32), best first; only docs sharing a term."""
        res = self.search(query, k)
        return res.ids, res.scores

    def search(
        self, query: str, k: int, extra_ids: Sequence[int] | np.ndarray = ()
    ) -> KeywordResult:
        """One scoring pass: the top k, plus scores and coverage of `extra_ids`.

        Fusion uses it: the keyword signals of the semantic candidates come for free.
        """
        return self.search_keeping(query, k, extra_ids)[0]

    def search_keeping(
        self, query: str, k: int, extra_ids: Sequence[int] | np.ndarray = ()
    ) -> tuple[KeywordResult, Callable[[Sequence[int] | np.ndarray], tuple[np.ndarray, np.ndarray]]]:
        """`search`, plus a function giving (scores, coverage) of more ids from the same
        scoring pass — full resonance learns of candidates only after spreading, and would
        otherwise score the whole query again."""
        q_terms, q_local, q_weights, view = self._query_terms(query)
        size = max(view.n_slots, 1)
        scores = np.zeros(size, dtype=np.float32)
        matched = np.zeros(size, dtype=np.float32)
        touched = np.empty(size, dtype=np.int32)
        total = float(q_weights.sum())
        inv = np.float32(1.0 / total if total > 0 else 0.0)
        k = max(int(k), 0)
        extra = self._slots(extra_ids)
        out_ids, out_scores, out_cov = (np.empty(k, np.int64), np.empty(k, np.float32),
                                        np.empty(k, np.float32))
        extra_scores, extra_cov = np.empty(len(extra), np.float32), np.empty(len(extra), np.float32)
        # the scoring pass, the top k and the extra ids' signals: one kernel call
        n, m = search_kernel(*view.main, *view.delta, view.doc_len, view.alive, view.slot_ids,
                             q_terms, q_local, q_weights, self._k1, self._b,
                             np.float32(view.avgdl or 1.0), inv, scores, matched, touched, k, extra, view.n_slots, out_ids,
                             out_scores, out_cov, extra_scores, extra_cov)
        sc = _Scored(scores, matched, touched, n, view, total)

        def more(ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            scores, matched = self._gather(sc, ids)
            return scores, matched * inv

        result = KeywordResult(ids=out_ids[:m], scores=out_scores[:m], coverage=out_cov[:m],
                               extra_scores=extra_scores, extra_coverage=extra_cov)
        return result, more

    def scores_for(self, query: str, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """BM25 scores (float32) of the given ids for `query`; 0 for unknown ids."""
        return self._gather(self._score(query), ids)[0]

    def _gather(
        self, sc: _Scored, ids: Sequence[int] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        slots = self._slots(ids)
        n = len(slots)
        scores = np.empty(n, dtype=np.float32)
        matched = np.empty(n, dtype=np.float32)
        # an id written after the view was taken has a slot past it: 0, as an unknown id
        gather_slots(slots, sc.view.n_slots, sc.scores, sc.matched, scores, matched)
        return scores, matched

    def _slots(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The slot of each id (-1: not indexed), read without the lock (a gather, or a dict
        look-up each)."""
        if isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.ndim == 1:
            found = self._slot_dense.get(ids)
            if found is not None:
                return found
        wanted = ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]
        n = len(wanted)
        return np.fromiter(map(self._slot_of.get, wanted, repeat(-1, n)), np.int64, n)
