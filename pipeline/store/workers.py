"""`soul worker` heartbeats: one row per executor, so survivors can tell a dead worker (a mixin
of `SessionStore`).

The table `soul_workers` (executor id, soul, last beat, started, taken_by, dead_after) is
the worker tier's, not the sessions': it is created on a worker's first beat (`CREATE TABLE IF
NOT EXISTS` under an advisory lock), not by the store's migrations. Workers read it to tell
the dead, and to split the shards among the live (`soul.store.shards`); processes that send
turns to workers read it to find a partition's worker (`live_workers`).

- `beat(executor, soul, dead_after=)`: this executor is alive now (its row's `taken_by` is
  cleared: a restarted worker owns its id again), and is dead once silent `dead_after`
  seconds (every reader applies the worker's own figure).
- `take_over(executor, dead_before)`: claim every other executor whose last beat is older
  than `dead_before` and that no one claimed yet. One UPDATE … RETURNING: two survivors
  racing for one dead worker queue on its row and only the first gets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from soul.store.connection import Connection
from soul.store.dialect import dialect_of

TABLE = "soul_workers"


@dataclass(frozen=True)
class WorkerBeat:
    """One worker as its heartbeat row says."""

    executor: str
    soul: str
    beat: float
    started: float
    taken_by: str | None
    dead_after: float = 30.0

    def live(self, now: float) -> bool:
        """Alive at `now`: not taken over, and beaten within its `dead_after`."""
        return self.taken_by is None and self.beat >= now - self.dead_after


class Workers:
    """Heartbeats of `soul worker` executors (see the module doc)."""

    _conn: Connection
    _read: Callable[[], AbstractContextManager[Connection]]
    _write: Callable[..., Any]
    _workers_ready: bool = False

    def _workers_table(self) -> None:
        if self._workers_ready:
            return

        def body(conn: Connection) -> None:
            dialect_of(conn).lock(conn, TABLE)  # two first workers create it once
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (executor TEXT PRIMARY KEY, soul TEXT NOT NULL,"
                " beat REAL NOT NULL, started REAL NOT NULL, taken_by TEXT, dead_after REAL)"
            )
            if not _has_column(conn, "dead_after"):  # a table made by an older soul worker
                conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN dead_after REAL")

        self._write(body)
        self._workers_ready = True

    def beat(self, executor: str, soul: str, now: float | None = None, dead_after: float = 30.0) -> None:
        """Record that `executor` is alive (and owns its id again), dead once silent
        `dead_after` seconds."""
        self._workers_table()
        at = time.time() if now is None else now
        self._write(lambda conn: conn.execute(
            f"INSERT INTO {TABLE} (executor, soul, beat, started, taken_by, dead_after)"
            " VALUES (?, ?, ?, ?, NULL, ?)"
            " ON CONFLICT (executor) DO UPDATE SET beat = excluded.beat, soul = excluded.soul,"
            " taken_by = NULL, dead_after = excluded.dead_after",
            (executor, soul, at, at, dead_after),
        ))

    def take_over(self, executor: str, dead_before: float) -> list[str]:
        """Claim for `executor` the workers silent since before `dead_before` that nobody
        claimed; their ids (each returned to one claimant only). In the same transaction the
        memory-partition leases they held lapse: a lease renewed after a worker's last beat
        would otherwise outlive the death by up to its time, and the turns re-run for it would
        find the partition still held. A claimed worker that was only stalled finds its leases
        moved on when it writes (the fence refuses it)."""
        self._workers_table()

        def body(conn: Connection) -> list[Any]:
            rows = conn.execute(
                f"UPDATE {TABLE} SET taken_by = ? WHERE executor <> ? AND taken_by IS NULL AND beat < ?"
                " RETURNING executor",
                (executor, executor, dead_before),
            ).fetchall()
            for (dead,) in rows:
                conn.execute("UPDATE field_leases SET expires = 0 WHERE owner = ?", (dead,))
            return rows

        rows = self._write(body)
        return sorted(r[0] for r in rows)

    def worker_beats(self, soul: str | None = None) -> list[WorkerBeat]:
        """Every worker's row (of `soul`'s workers, when given), by executor id."""
        self._workers_table()
        where, args = (" WHERE soul = ?", (soul,)) if soul is not None else ("", ())
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT executor, soul, beat, started, taken_by, dead_after FROM {TABLE}{where}"
                " ORDER BY executor", args,
            ).fetchall()
        return [WorkerBeat(r[0], r[1], float(r[2]), float(r[3]), r[4], float(r[5]) if r[5] is not None else 30.0)
                for r in rows]

    def live_workers(self, soul: str, now: float | None = None) -> list[str]:
        """The executors running `soul` that are alive now (see `WorkerBeat.live`), sorted."""
        at = time.time() if now is None else now
        return [b.executor for b in self.worker_beats(soul) if b.live(at)]


def _has_column(conn: Connection, column: str) -> bool:
    if dialect_of(conn).name == "sqlite":
        return any(r[1] == column for r in conn.execute(f"PRAGMA table_info({TABLE})").fetchall())
    return conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = ? AND column_name = ?", (TABLE, column),
    ).fetchone() is not None
