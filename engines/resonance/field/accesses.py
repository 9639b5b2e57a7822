"""Accesses from reading, queued: recall never waits for the log.

Each recalled (or resonated) memory's access is logged, since use is evidence a memory
matters (it resets decay and feeds ACT-R). The accesses wait here and are logged as one entry
with the next write, at close, or once `limit` of them wait. A read-only store logs nothing:
its queue stays empty.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.durable import Store

__all__ = ["AccessQueue"]

_LOGGED = 1024  # rows kept for the next write's catch-up (a flush logs at most ~`limit`)


class AccessQueue:
    """Recalled memory ids waiting to be logged as accesses of ``store``."""

    def __init__(self, store: Store, lock: threading.RLock, limit: int = 256) -> None:
        self._store = store
        self._lock = lock  # the Field's: a flush is a write
        self.limit = limit
        self._queued: list[str] = []
        # the rows logged since the last write's `take_logged`: their access histories are
        # read for scoring in the writer's thread, not by the next query
        self._logged: list[int] = []

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, memory_ids: Iterable[str]) -> None:
        """Queue accesses; flush once `limit` of them wait (nothing if the store is read-only)."""
        if self._store.read_only:
            return
        self._queued.extend(memory_ids)
        if len(self._queued) >= self.limit:
            self.flush()

    def flush(self) -> None:
        """Log the queued accesses of memories still alive (nothing once the store closed)."""
        with self._lock:
            queued, self._queued = self._queued, []
            st = self._store.state
            alive, rows = [], []
            for m in queued:
                row = st.rows.get(m)
                if row is not None and st.is_alive(row):
                    alive.append(m)
                    rows.append(row)
            if alive and not self._store.closed:
                self._store.access(alive)
                if len(self._logged) < _LOGGED:  # beyond: the queries read them, as before
                    self._logged.extend(rows)

    def take_logged(self) -> list[int]:
        """The rows whose accesses were logged since the last call (at most ~`_LOGGED`)."""
        with self._lock:
            logged, self._logged = self._logged, []
            return logged
