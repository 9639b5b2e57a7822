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


class AccessQueue:
    """Recalled memory ids waiting to be logged as accesses of ``store``."""

    def __init__(self, store: Store, lock: threading.RLock, limit: int = 256) -> None:
        self._store = store
        self._lock = lock  # the Field's: a flush is a write
        self.limit = limit
        self._queued: list[str] = []

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
            alive = [m for m in queued if (row := st.rows.get(m)) is not None and st.is_alive(row)]
            if alive and not self._store.closed:
                self._store.access(alive)
