"""Who runs what among live workers: sessions hashed into shards by (soul, user), each shard
given to one worker by rendezvous hashing. Pure functions over plain data.

- `shard_of(soul, user)`: a session's shard, stored with it (`sessions.shard`) so a worker
  reads only its own shards' sessions. A (soul, user)'s sessions share a shard, so the worker
  that schedules them is the one that owns their memory partition (docs/scale.md).
- `owner_of(key, workers)`: rendezvous (highest random weight) hashing: each (worker, key)
  gets a pseudo-random score and the highest wins. A worker joining takes exactly the keys it
  now scores highest on; a worker leaving gives up exactly its own; no other key moves. That
  is the fewest moves any assignment can make (`moves` counts them).
- `share(me, workers)`: the shards `me` owns.

The hashes are blake2b, not Python's `hash()`, so every process and every version agrees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

SHARDS = 1024
"""How many shards a soul's sessions are spread over. Enough that 100 workers each get about
ten (within ±1/√10 of an even split); few enough that a worker's list of shards is one short
`IN (…)`."""


def _score(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def shard_of(soul: str, user: str) -> int:
    """The shard of (soul, user)'s sessions, in [0, SHARDS)."""
    return _score(f"{soul}\x00{user}") % SHARDS


def owner_of(key: str | int, workers: Sequence[str]) -> str | None:
    """The worker that owns `key` among `workers` (None when there is none)."""
    best: tuple[int, str] | None = None
    for worker in workers:
        candidate = (_score(f"{worker}\x00{key}"), worker)
        if best is None or candidate > best:
            best = candidate
    return best[1] if best is not None else None


def share(me: str, workers: Iterable[str]) -> frozenset[int]:
    """The shards `me` owns when `workers` are live (`me` counts as live)."""
    ring = sorted(set(workers) | {me})
    return frozenset(s for s in range(SHARDS) if owner_of(s, ring) == me)


def assignment(workers: Iterable[str]) -> dict[int, str]:
    """Every shard's owner among `workers` (empty without workers)."""
    ring = sorted(set(workers))
    if not ring:
        return {}
    return {s: owner_of(s, ring) or "" for s in range(SHARDS)}


def moves(before: dict[int, str], after: dict[int, str]) -> int:
    """How many shards changed owner between two assignments."""
    return sum(1 for s, owner in after.items() if before.get(s) != owner)
