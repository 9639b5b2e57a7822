"""Memory partitions in the session store (a mixin of `SessionStore`): who owns a (soul, user)
partition of a memory field, and the memories its committed turns carry.

`field_leases` has one row per partition: `owner`, the fence `epoch`, `expires`, `taken`.

- `take_lease(soul, user, owner, ttl)`: take or renew the lease in one statement,
  `INSERT … ON CONFLICT (soul, user) DO UPDATE … WHERE owner = me OR expires < now
  RETURNING epoch`: atomic on both backends, so of two processes racing for a lapsed lease one
  gets it. The epoch rises by one when the owner changes and stays when the owner renews.
- `renew_leases(owner, partitions, ttl)`: push the expiry of leases `owner` still holds (one
  UPDATE; a lease another process took meanwhile is not touched). The worker renews the
  partitions it has used lately with its heartbeat; an idle one lapses `ttl` seconds later.
- `release_leases(owner)`: give leases up now (a worker stopping, or handing a partition to
  the worker the shards now give it).
- `check_fence(conn, fence)`: inside a commit's transaction, refuse (`LeaseLost`) unless the
  lease still has the fence's owner and epoch. On PostgreSQL the row is read `FOR SHARE`, so a
  takeover waits for a commit in flight and then sees it.
- `partition_memories(soul, user)`: the items every committed turn of the partition's sessions
  wrote to the field (`commits.remember`), in commit order: what a new owner rebuilds from.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from soul.errors import LeaseLost
from soul.records import Fence
from soul.store.connection import Connection
from soul.store.dialect import dialect_of

TAKE = (
    "INSERT INTO field_leases (soul, user, owner, epoch, expires, taken) VALUES (?, ?, ?, 1, ?, ?)"
    " ON CONFLICT (soul, user) DO UPDATE SET"
    " epoch = CASE WHEN field_leases.owner = excluded.owner THEN field_leases.epoch"
    " ELSE field_leases.epoch + 1 END,"
    " taken = CASE WHEN field_leases.owner = excluded.owner THEN field_leases.taken"
    " ELSE excluded.taken END,"
    " owner = excluded.owner, expires = excluded.expires"
    " WHERE field_leases.owner = excluded.owner OR field_leases.expires < ?"
    " RETURNING epoch, taken"
)


@dataclass(frozen=True)
class Lease:
    """A memory partition's lease as its row says."""

    soul: str
    user: str
    owner: str
    epoch: int
    expires: float
    taken: float

    @property
    def fence(self) -> Fence:
        """What a commit or write under this lease carries."""
        return Fence(self.soul, self.user, self.owner, self.epoch)

    def live(self, now: float | None = None) -> bool:
        """Whether it has not lapsed."""
        return self.expires >= (time.time() if now is None else now)


class Partitions:
    """Leases of memory partitions and the memories to rebuild them from (see the module doc)."""

    _read: Callable[[], AbstractContextManager[Connection]]
    _write: Callable[..., Any]

    def take_lease(self, soul: str, user: str, owner: str, ttl: float, now: float | None = None) -> Lease | None:
        """Take or renew (soul, user)'s lease for `owner` until now + `ttl`; None when another
        owner's lease has not lapsed (`lease()` says whose)."""
        at = time.time() if now is None else now
        row = self._write(lambda conn: conn.execute(TAKE, (soul, user, owner, at + ttl, at, at)).fetchone())
        if row is None:
            return None
        return Lease(soul, user, owner, int(row[0]), at + ttl, float(row[1]))

    def lease(self, soul: str, user: str) -> Lease | None:
        """The partition's lease row (None: never taken)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT owner, epoch, expires, taken FROM field_leases WHERE soul = ? AND user = ?",
                (soul, user),
            ).fetchone()
        return Lease(soul, user, row[0], int(row[1]), float(row[2]), float(row[3])) if row else None

    def leases(self, soul: str, users: Iterable[str] | None = None) -> dict[str, Lease]:
        """The leases of `soul`'s partitions (of `users` only, when given), by user."""
        query = "SELECT user, owner, epoch, expires, taken FROM field_leases WHERE soul = ?"
        wanted = sorted(set(users)) if users is not None else None
        chunks = [wanted[i:i + 500] for i in range(0, len(wanted), 500)] if wanted is not None else [None]
        out: dict[str, Lease] = {}
        with self._read() as conn:
            for chunk in chunks:
                if chunk == []:
                    continue
                where = f" AND user IN ({', '.join('?' * len(chunk))})" if chunk is not None else ""
                for r in conn.execute(query + where, (soul, *(chunk or ()))).fetchall():
                    out[r[0]] = Lease(soul, r[0], r[1], int(r[2]), float(r[3]), float(r[4]))
        return out

    def renew_leases(self, owner: str, partitions: Iterable[tuple[str, str]], ttl: float,
                     now: float | None = None) -> int:
        """Extend to now + `ttl` the leases of these (soul, user) partitions that `owner`
        still holds; how many were."""
        at = time.time() if now is None else now
        keys = sorted(set(partitions))
        if not keys:
            return 0

        def body(conn: Connection) -> int:
            done = 0
            for soul in sorted({k[0] for k in keys}):
                users = [u for s, u in keys if s == soul]
                for i in range(0, len(users), 500):
                    chunk = users[i:i + 500]
                    done += conn.execute(
                        f"UPDATE field_leases SET expires = ? WHERE owner = ? AND soul = ?"
                        f" AND user IN ({', '.join('?' * len(chunk))})",
                        (at + ttl, owner, soul, *chunk),
                    ).rowcount
            return done

        return int(self._write(body))

    def release_leases(self, owner: str, partitions: Iterable[tuple[str, str]] | None = None) -> int:
        """Let `owner`'s leases (of these partitions, or all) lapse now; how many it held. The
        epoch stays: the next owner raises it, and a write carrying the old one is refused."""
        keys = sorted(set(partitions)) if partitions is not None else None

        def body(conn: Connection) -> int:
            if keys is None:
                return int(conn.execute("UPDATE field_leases SET expires = 0 WHERE owner = ?", (owner,)).rowcount)
            return sum(int(conn.execute(
                "UPDATE field_leases SET expires = 0 WHERE owner = ? AND soul = ? AND user = ?",
                (owner, soul, user),
            ).rowcount) for soul, user in keys)

        return int(self._write(body))

    def partition_memories(self, soul: str, user: str) -> Iterator[tuple[int, str, list[dict[str, Any]]]]:
        """(commit id, session id, items) of every commit of (soul, user)'s sessions that
        recorded what it wrote to the memory field, in commit order."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT c.id, c.session_id, c.remember FROM commits c JOIN sessions s ON s.id = c.session_id"
                " WHERE s.soul = ? AND s.user = ? AND c.remember IS NOT NULL ORDER BY c.id",
                (soul, user),
            ).fetchall()
        for cid, sid, items in rows:
            yield int(cid), str(sid), list(json.loads(items))


def check_fence(conn: Connection, fence: Fence) -> None:
    """Inside a write transaction: refuse with `LeaseLost` unless (soul, user)'s lease still has
    `fence`'s owner and epoch (read `FOR SHARE` on PostgreSQL: a takeover waits for us)."""
    dialect = dialect_of(conn)
    share = " FOR SHARE" if dialect.name != "sqlite" else ""
    row = conn.execute(
        "SELECT owner, epoch FROM field_leases WHERE soul = ? AND user = ?" + share,
        (fence.soul, fence.user),
    ).fetchone()
    if row is None or row[0] != fence.owner or int(row[1]) != fence.epoch:
        now = f"{row[0]} holds epoch {row[1]}" if row is not None else "nobody holds it"
        raise LeaseLost(
            f"memory partition {fence.soul}/{fence.user}: {fence.owner}'s lease (epoch {fence.epoch}) has"
            f" moved on ({now}): this commit is refused, nothing of it was written; the turn runs again"
            " on the partition's owner"
        )
