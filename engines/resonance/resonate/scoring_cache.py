"""What the scoring factors read of the rows, kept across queries: metas and access times.

A factor whose signal no candidate's meta holds is neutral, so every query asks which keys
the candidates' metas hold; only when one does are the metas themselves read. `MetaCache`
keeps, per row of one `State`, the id of its meta's key set in a row-aligned array (rows
with the same keys share one set: a conversation's memories all hold ``{"session": ...}``),
so the question costs a gather and a count, not a pass over a few hundred dicts; the
decoded dicts are kept beside it (bounded). A row's meta is written once and cleared only
when the row is forgotten: a forget since the last query (the state's tombstone count moved)
clears the forgotten rows' entries; another `State` starts the cache over.

`SourceCodes` keeps, per row, a small code for its source (the same few sources — the user,
the model — come back query after query), and per factor params the value of each code, so
the Epistemic factor is a gather, not a look-up per candidate.

`AccessHistories` keeps the access times of the rows scored (a few hundred a query, ~7 floats
each in a conversation, scattered Python floats that a cold cache made ~0.1 ms of a turn) in
one matrix, row by row; a row is read again only once its access count moved (the state
counts an access after it has appended its time) or it was forgotten.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from itertools import compress
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..recall.postings import grow
from ..store.ops import FLAG_DELETED
from ..store.state import ACCESS_HISTORY

if TYPE_CHECKING:
    from ..store.state import State

__all__ = ["AccessHistories", "MetaCache", "SourceCodes"]

_DICTS = 65_536  # decoded metas kept (their key sets' ids are kept for every row)
_SLOTS = 65_536  # rows whose access times are kept (then started over)
_WIDTH = ACCESS_HISTORY + 1  # a history read between a writer's append and its trim
_NONE = 0  # the key-set id of a row without a meta (none, forgotten, empty, not an object)
# new rows whose metas a writer's catch-up reads (the newest): a conversation's write adds a
# few; a bulk import's others are read by the queries that score them, as before, not all
# decoded and kept in the writer's thread under the cache's lock
_CATCH_UP = 256


_KERNELS: Any = None


def _kernels() -> Any:
    """kernels/scoring.py (the caches' gathers and checks), imported on first use."""
    global _KERNELS
    if _KERNELS is None:
        from ..kernels import scoring

        _KERNELS = scoring
    return _KERNELS


class MetaCache:
    """Per row of one `State`: its meta's key-set id (-1 not read yet) and decoded dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decoded = 0  # metas decoded so far (what a test counts)
        self._start(None)

    def _start(self, state: State | None) -> None:
        self._state = state
        self._key_of = np.full(0, -1, np.int32)
        self._sets: list[frozenset[str]] = [frozenset()]
        self._set_id: dict[frozenset[str], int] = {frozenset(): _NONE}
        self._dicts: dict[int, dict[str, Any]] = {}
        self._gone = 0  # the state's tombstones when last looked at
        self._caught = 0 if state is None else state.n_rows  # rows a catch-up has looked at

    def keys(self, state: State, rows: np.ndarray) -> frozenset[str]:
        """Every key some row of ``rows`` (int64) has in its meta."""
        with self._lock:
            ids, lo, hi = self._ids_bounds(state, rows)
            if not len(ids):
                return frozenset()
            sets = self._sets
            if lo == hi:  # the usual case: the candidates' metas hold the same keys
                return sets[lo]
            present = np.flatnonzero(np.bincount(ids, minlength=len(sets)))
            return frozenset().union(*(sets[i] for i in present.tolist()))

    def catch_up(self, state: State) -> None:
        """Read the metas of the rows written since, if a query has read ``state`` before (a
        writer's thread calls it after a write: the next query then decodes none of them);
        the newest `_CATCH_UP` of them at most."""
        with self._lock:
            if state is not self._state:
                return
            n = state.n_rows
            self._key_of = key_of = grow(self._key_of, n, -1)
            for row in range(max(self._caught, n - _CATCH_UP), n):
                if key_of[row] < 0:
                    m = self._decode(state, row)
                    key_of[row] = self._set_of(m) if m else _NONE
            self._caught = n

    def metas(self, state: State, rows: np.ndarray) -> list[tuple[int, dict[str, Any]]]:
        """(position, meta) of the rows of ``rows`` with a non-empty meta, in order."""
        with self._lock:
            ids = self._ids(state, rows)
            at = np.flatnonzero(ids != _NONE).tolist()
            found = [(i, self._dicts.get(r)) for i, r in zip(at, rows[at].tolist(), strict=True)]
            missing = [k for k, (_, m) in enumerate(found) if m is None]
            for k in missing:  # kept key set, dict dropped with the bounded dicts: again
                i = found[k][0]
                m = self._decode(state, int(rows[i]))
                found[k] = (i, m)
            return [(i, m) for i, m in found if m]

    def _ids(self, state: State, rows: np.ndarray) -> np.ndarray:
        """The key-set id of each row, the rows not read before decoded first."""
        return self._ids_bounds(state, rows)[0]

    def _ids_bounds(self, state: State, rows: np.ndarray) -> tuple[np.ndarray, int, int]:
        """`_ids`, and the smallest and largest of them (0, -1 for no rows)."""
        if state is not self._state:  # another state: its rows are others
            self._start(state)
        n = state.n_rows
        gone = n - state.alive
        self._key_of = grow(self._key_of, n, -1)
        if gone != self._gone:  # a row was forgotten: its meta was cleared
            self._gone = gone
            dead = _dead_rows(state)
            self._key_of[dead] = _NONE
            for r in dead.tolist():
                self._dicts.pop(r, None)
        rows = np.ascontiguousarray(rows, np.int64)
        ids, unread = np.empty(len(rows), np.int32), np.empty(len(rows), np.int64)
        # the gather, the rows not read yet and the bounds: one kernel call
        n_unread, lo, hi = _kernels().key_sets(self._key_of, rows, ids, unread)
        if not n_unread:
            return ids, lo, hi
        unread = unread[:n_unread]
        # rows without a meta (most, in a field written without one) are told apart in C;
        # only the others are decoded
        fresh = rows[unread]
        fresh_list = fresh.tolist()
        meta = state.meta
        texts = itemgetter(*fresh_list)(meta) if len(fresh_list) > 1 else (meta[fresh_list[0]],)
        ids[unread] = self._key_of[fresh] = _NONE
        for k in compress(range(len(texts)), texts):
            row = fresh_list[k]
            m = self._decode(state, row)
            if m:
                ids[unread[k]] = self._key_of[row] = self._set_of(m)
        return ids, int(ids.min()), int(ids.max())

    def _decode(self, state: State, row: int) -> dict[str, Any] | None:
        text = state.meta[row]
        if not text:  # no meta (none written, or forgotten): read as none
            return None
        self.decoded += 1
        try:
            m = json.loads(text)
        except ValueError:  # undecodable meta: read as none rather than fail a recall
            return None
        if not isinstance(m, dict) or not m:
            return None
        if len(self._dicts) >= _DICTS:
            self._dicts.clear()
        self._dicts[row] = m
        return m

    def _set_of(self, meta: dict[str, Any]) -> int:
        keys = frozenset(meta)
        i = self._set_id.get(keys)
        if i is None:
            i = self._set_id[keys] = len(self._sets)
            self._sets.append(keys)
        return i


class SourceCodes:
    """Per row of one `State`: the code of its source (-1: not read yet; a forgotten row's
    is read again: forgetting clears it), each distinct source once, and per factor params
    the value of each code."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start(None)

    def _start(self, state: State | None) -> None:
        self._state = state
        self._code_of = np.full(0, -1, np.int32)
        self._sources: list[str | None] = []
        self._code: dict[str | None, int] = {}
        # id(params) -> (params, each code's value, how many codes it holds)
        self._tables: dict[int, tuple[Any, np.ndarray, int]] = {}
        self._gone = 0

    def values(self, state: State, rows: np.ndarray, params: Any,
               value_of: Callable[[str | None], float]) -> float | np.ndarray:
        """``value_of(source)`` of each of ``rows`` (int64) under ``params`` (worked out once
        per distinct source and params): one float when the rows all have the same source,
        else one float64 per row."""
        with self._lock:
            if state is not self._state:  # another state: its rows are others
                self._start(state)
            n = state.n_rows
            self._code_of = grow(self._code_of, n, -1)
            gone = n - state.alive
            if gone != self._gone:  # a row was forgotten: its source was cleared
                self._gone = gone
                self._code_of[_dead_rows(state)] = -1
            rows = np.ascontiguousarray(rows, np.int64)
            codes, unread = np.empty(len(rows), np.int32), np.empty(len(rows), np.int64)
            n_unread, lo, hi = _kernels().key_sets(self._code_of, rows, codes, unread)
            if n_unread:
                source, code_of, known = state.source, self._code_of, self._code
                for i in unread[:n_unread].tolist():
                    row = int(rows[i])
                    s = source[row]
                    code = known.get(s)
                    if code is None:
                        code = known[s] = len(self._sources)
                        self._sources.append(s)
                    codes[i] = code_of[row] = code
                lo, hi = int(codes.min()), int(codes.max())
            memo = self._tables.get(id(params))
            if memo is None or memo[0] is not params:
                if len(self._tables) >= 64:
                    self._tables.clear()
                memo = (params, np.zeros(0), 0)
            _, table, known_codes = memo
            if known_codes < len(self._sources):  # sources new since: their values, once
                table = grow(table, len(self._sources))
                table[known_codes:len(self._sources)] = list(map(value_of, self._sources[known_codes:]))
                memo = (params, table, len(self._sources))
            self._tables[id(params)] = memo
            if len(rows) and lo == hi:
                return float(table[lo])
            # the rows' values by their codes: as long as the rows, whatever the sources
            return table[codes]


def _dead_rows(state: State) -> np.ndarray:
    """The forgotten rows (their flags read from a copy: never a view of the state's)."""
    return np.flatnonzero(np.frombuffer(bytes(state.flags), np.uint8) & FLAG_DELETED)


class AccessHistories:
    """Per row of one `State`: its kept access times (a slot of one matrix; slot 0 is the
    empty history) and the access count they were read at (-1: not read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.read_rows = 0  # access lists copied from the state so far (what a test counts)
        self._start(None)

    def _start(self, state: State | None) -> None:
        self._state = state
        self._accessed = None if state is None else state.accessed
        self._slot = np.zeros(0, np.int64)
        self._seen = np.full(0, -1, np.int64)
        self._times = np.zeros((1024, _WIDTH))
        self._n = np.zeros(1024, np.int64)
        self._used = 1
        self._gone = 0

    def of(self, state: State, rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' access times laid end to end, how many per row), given each row's
        access count as gathered (``counts``, float64)."""
        if not state.accessed:  # no memory was ever accessed (recalls that touch nothing)
            return np.zeros(0), np.zeros(len(rows), np.int64)
        with self._lock:
            if state is not self._state or state.accessed is not self._accessed:
                self._start(state)
            n = state.n_rows
            self._seen, self._slot = grow(self._seen, n, -1), grow(self._slot, n)  # alike in size
            gone = n - state.alive
            if gone != self._gone:  # a forgotten row's times were dropped: read them again
                self._gone = gone
                self._seen[_dead_rows(state)] = -1
            rows = np.ascontiguousarray(rows, np.int64)
            counts = np.ascontiguousarray(counts, np.float64)
            kernels = _kernels()
            at = np.empty(len(rows), np.int64)
            n_stale = kernels.stale_histories(rows, counts, self._seen, at)  # exact: < 2**53
            if n_stale and self._used + n_stale > _SLOTS:
                # full: start over, and read every row of this query again (a row read before
                # would otherwise keep a slot the new rows are about to take)
                self._seen[:] = -1
                self._slot[:] = 0
                self._used = 1
                at, n_stale = np.arange(len(rows)), len(rows)
            if n_stale:
                # rows never accessed (most, in a field nobody recalls from) take the empty
                # slot; only the others' times are copied
                accessed = state.accessed
                has, has_counts = [], []
                for row, count in zip(rows[at[:n_stale]].tolist(),
                                      counts[at[:n_stale]].tolist(), strict=True):
                    if row in accessed:
                        has.append(row)
                        has_counts.append(int(count))
                    else:
                        self._slot[row] = 0
                        self._seen[row] = count
                if has:
                    self._read(state, has, has_counts)
            # the rows' kept times laid end to end, one kernel call (slots gathered in C)
            flat, kept = np.empty(len(rows) * _WIDTH), np.empty(len(rows), np.int64)
            size = kernels.gather_histories(rows, self._slot, self._n, self._times, flat, kept)
            return flat[:size], kept

    def catch_up(self, state: State, rows: Sequence[int]) -> None:
        """Read the kept times of ``rows`` (live rows whose accesses were just logged) as
        `of` would at their access counts now: in the writer's thread after the write that
        logged them, so the next query that scores them gathers."""
        if not rows:
            return
        count = state.access_count
        rows = sorted(set(rows))
        self.of(state, np.array(rows, np.int64), np.array([count[r] for r in rows], np.float64))

    def _read(self, state: State, rows: list[int], counts: list[int]) -> None:
        accessed = state.accessed
        for row, count in zip(rows, counts, strict=True):
            times = tuple(accessed.get(row, ()))  # a copy: a writer may append meanwhile
            self.read_rows += 1
            slot = int(self._slot[row])
            if times and not slot:
                slot = self._slot[row] = self._used
                self._used += 1
                if slot == len(self._n):
                    self._times = np.concatenate([self._times, np.zeros_like(self._times)])
                    self._n = np.concatenate([self._n, np.zeros_like(self._n)])
            if slot:
                self._times[slot, : len(times)] = times
                self._n[slot] = len(times)
            self._seen[row] = count
