"""`soul worker` heartbeats: one row per executor, so survivors can tell a dead worker (a mixin
of `SessionStore`).

The table `soul_workers` (executor id, soul, last beat, started, taken_by) is the worker
tier's, not the sessions': it is created on a worker's first beat (`CREATE TABLE IF NOT EXISTS`
under an advisory lock), not by the store's migrations, and nothing else reads it.

- `beat(executor, soul)`: this executor is alive now (its row's `taken_by` is cleared: a
  restarted worker owns its id again).
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
                " beat REAL NOT NULL, started REAL NOT NULL, taken_by TEXT)"
            )

        self._write(body)
        self._workers_ready = True

    def beat(self, executor: str, soul: str, now: float | None = None) -> None:
        """Record that `executor` is alive (and owns its id again)."""
        self._workers_table()
        at = time.time() if now is None else now
        self._write(lambda conn: conn.execute(
            f"INSERT INTO {TABLE} (executor, soul, beat, started, taken_by) VALUES (?, ?, ?, ?, NULL)"
            " ON CONFLICT (executor) DO UPDATE SET beat = excluded.beat, soul = excluded.soul,"
            " taken_by = NULL",
            (executor, soul, at, at),
        ))

    def take_over(self, executor: str, dead_before: float) -> list[str]:
        """Claim for `executor` the workers silent since before `dead_before` that nobody
        claimed; their ids (each returned to one claimant only)."""
        self._workers_table()
        rows = self._write(lambda conn: conn.execute(
            f"UPDATE {TABLE} SET taken_by = ? WHERE executor <> ? AND taken_by IS NULL AND beat < ?"
            " RETURNING executor",
            (executor, executor, dead_before),
        ).fetchall())
        return sorted(r[0] for r in rows)

    def worker_beats(self) -> list[WorkerBeat]:
        """Every worker's row, by executor id."""
        self._workers_table()
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT executor, soul, beat, started, taken_by FROM {TABLE} ORDER BY executor"
            ).fetchall()
        return [WorkerBeat(r[0], r[1], float(r[2]), float(r[3]), r[4]) for r in rows]
