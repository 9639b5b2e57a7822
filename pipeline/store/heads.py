"""A session's snapshot head as this store last read or wrote it, kept while nothing changed it.

Every turn starts by reading its session's head (`reading._SNAPSHOT_HEAD`: the session row, its
state, Chetana state, latest user model, last commit and working-memory count: one statement of
six subqueries, ~0.1 ms in a turn). When this store's own commit wrote the head and nothing was
written since, the commit knows it already. Two counters tell "nothing since" (SQLite only):

- `PRAGMA data_version` changes when another connection — another process, or another store
  on the same file — commits (https://sqlite.org/pragma.html#pragma_data_version); a commit of
  this connection does not change it. A head read is kept with the value read just before it
  (a commit between the two shows as a change: the head is read again, never taken stale).
- the store's count of its own write transactions (`SessionStore._writes`, moved on by every
  `_write`: an expiry, a user model written, another session's commit, a delete) — every write
  of this connection goes through `_write`, except the JSONL cursor's (`logged_commit`, which
  the head does not hold).

A commit works its head out from the kept one (what it wrote, the rest as kept) when no other
write of the store came between, and keeps the kept head's data version: another connection's
commit before or during it shows then as a change at the next snapshot, as it would have
without the commit. A head whose two counters are both as kept is the head a read would give;
anything else is read again (and kept anew).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from soul.store.connection import Connection

__all__ = ["Head", "Heads", "data_version"]

# the head's columns after the session's (see reading._SNAPSHOT_HEAD)
STATE, CHETANA, MODEL_VERSION, MODEL_TEXT, LAST_COMMIT, MEMORY_COUNT = range(-6, 0)
KEPT = 4096  # sessions' heads kept, at most (a head is ~10 small values and two texts it shares)


def data_version(conn: Connection) -> int:
    """The connection's `PRAGMA data_version`."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


@dataclass(frozen=True, slots=True)
class Head:
    """A snapshot head row, true when the connection's data version was `version` and the
    store had made `writes` write transactions."""

    row: tuple[Any, ...]
    version: int
    writes: int


class Heads:
    """The kept heads of a store's sessions (thread-safe; the store reads and writes them under
    its connection's lock, so a head and the counters it is checked against agree)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Head] = {}
        self._lock = threading.Lock()

    def kept(self, conn: Connection, session_id: str, writes: int) -> tuple[Any, ...] | None:
        """The session's head row if nothing was written since it was kept (one `PRAGMA`),
        else None. Under the store's lock."""
        head = self._by_id.get(session_id)
        if head is None or head.writes != writes or data_version(conn) != head.version:
            return None
        return head.row

    def keep(self, session_id: str, head: Head) -> None:
        with self._lock:
            if len(self._by_id) >= KEPT and session_id not in self._by_id:
                self._by_id.clear()
            self._by_id[session_id] = head

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._by_id.pop(session_id, None)

    def after_commit(self, session_id: str, writes: int, session: Sequence[Any], state: str | None,
                     chetana: str | None, model: tuple[int, str] | None, commit: int,
                     memory: int) -> Head | None:
        """The head after a commit of this store, worked out inside its transaction (`writes`:
        this write's count): `session` the session's columns as listed after it, then what it
        wrote (None: not written), `commit` its id and `memory` its working-memory rows; the rest
        as kept. None unless a head is kept and no other write of the store came after it (this
        one is the next of its `writes`). Kept only once the transaction has committed (`keep`),
        with the kept head's data version (see the module docstring)."""
        before = self._by_id.get(session_id)
        if before is None or before.writes != writes - 1:
            return None
        old = before.row
        return Head(
            (*session,
             state if state is not None else old[STATE],
             chetana if chetana is not None else old[CHETANA],
             model[0] if model is not None else old[MODEL_VERSION],
             model[1] if model is not None else old[MODEL_TEXT],
             commit, old[MEMORY_COUNT] + memory),
            before.version, writes)
