"""The rows' metas as the scoring factors read them, decoded once and kept across queries.

A factor whose signal no candidate's meta holds is neutral, so every query asks which keys
the candidates' metas hold; only when one does are the metas themselves read. `MetaCache`
keeps, per row of one `State`, the id of its meta's key set in a row-aligned array (rows
with the same keys share one set: a conversation's memories all hold ``{"session": ...}``),
so the question costs a gather and a count, not a pass over a few hundred dicts; the
decoded dicts are kept beside it (bounded). A row's meta is written once and cleared only
when the row is forgotten: a forget since the last query (the state's tombstone count moved)
clears the forgotten rows' entries; another `State` starts the cache over.
"""

from __future__ import annotations

import json
import threading
from itertools import compress
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..store.ops import FLAG_DELETED

if TYPE_CHECKING:
    from ..store.state import State

__all__ = ["MetaCache"]

_DICTS = 65_536  # decoded metas kept (their key sets' ids are kept for every row)
_NONE = 0  # the key-set id of a row without a meta (none, forgotten, empty, not an object)


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

    def keys(self, state: State, rows: np.ndarray) -> frozenset[str]:
        """Every key some row of ``rows`` (int64) has in its meta."""
        with self._lock:
            ids = self._ids(state, rows)
            if not len(ids):
                return frozenset()
            sets = self._sets
            lo, hi = int(ids.min()), int(ids.max())
            if lo == hi:  # the usual case: the candidates' metas hold the same keys
                return sets[lo]
            present = np.flatnonzero(np.bincount(ids, minlength=len(sets)))
            return frozenset().union(*(sets[i] for i in present.tolist()))

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
        if state is not self._state:  # another state: its rows are others
            self._start(state)
        n = state.n_rows
        gone = n - state.alive
        if n > len(self._key_of):
            grown = np.full(max(n, 2 * len(self._key_of), 1024), -1, np.int32)
            grown[: len(self._key_of)] = self._key_of
            self._key_of = grown
        if gone != self._gone:  # a row was forgotten: its meta was cleared
            self._gone = gone
            flags = np.frombuffer(bytes(state.flags), np.uint8)  # a copy: never a view
            dead = np.flatnonzero(flags & FLAG_DELETED)
            self._key_of[dead] = _NONE
            for r in dead.tolist():
                self._dicts.pop(r, None)
        ids = self._key_of[rows]
        unread = np.flatnonzero(ids < 0)
        if not len(unread):
            return ids
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
        return ids

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
