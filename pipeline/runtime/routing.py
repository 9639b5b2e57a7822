"""Turns sent to the worker that owns their memory partition (a PostgreSQL store with `soul
worker`s; docs/scale.md, "Memory fields at scale").

A memory soul's field is partitioned by (soul, user) on PostgreSQL, and a partition's turns and
cycles run only on its owner. A process that holds a session with `SOUL_RUNNER=dbos` and owns
no partitions itself (`soul run`, `soul serve`, an app) sends each turn of such a soul to the
owner as a DBOS workflow on that worker's own queue, then waits for its result. Nobody
configures who owns what:

- `route(store, soul, user)`: the partition's lease holder while its lease is live and it is
  a live worker (leases are sticky), else the worker the shards give the partition
  (`soul.store.shards`: rendezvous over the soul's live workers, by their heartbeats).
- `TurnSender.send(session, text)`: enqueues the turn workflow `soul-uturn:<session>:<base
  turn>:<hash of text>` on `soul-turns@<owner>` (partitioned by session: one at a time), with
  DBOS's client (no DBOS launch here), and waits. The id makes it once-only: the same turn
  sent again joins the first. If its worker dies before dequeuing it, the sender moves it to
  the partition's next owner; one that died mid-turn is taken over by a survivor
  (`runtime/durable/recovery.py`), which runs it again: the store commits a turn once.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from soul.errors import RunError
from soul.runtime.events import Reply, TurnCommitted, TurnResult
from soul.store import owner_of, shard_of

if TYPE_CHECKING:
    from soul.records import SessionInfo
    from soul.store import SessionStore

APPLICATION = "soul"  # DBOS's application name: the workers' and the senders'
CYCLE_QUEUE = "soul-cycles"
TURN_QUEUE = "soul-turns"
USER_TURN = "soul.user_turn"
WATCH_SECONDS = 2.0  # how often a sender looks whether its turn's worker is still alive


def owner_queue(base: str, owner: str) -> str:
    """The queue of `owner`'s own work (`soul-turns@w1`): only that worker dequeues it."""
    return f"{base}@{owner}"


def queue_owner(queue: str | None) -> str | None:
    """The worker whose own queue this is (None: a queue every worker shares)."""
    if not queue or "@" not in queue:
        return None
    return queue.split("@", 1)[1]


def user_turn_id(session_id: str, base: int, text: str) -> str:
    """The workflow id of a user turn: once per (session, base turn, text)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"soul-uturn:{session_id}:{base}:{digest}"


def workflow_session(workflow_id: str) -> str | None:
    """The session a cycle, spontaneous-turn or user-turn workflow id belongs to."""
    parts = workflow_id.split(":")
    return parts[1] if len(parts) > 2 and parts[0] in ("soul-cycle", "soul-turn", "soul-uturn") else None


def system_database_url(store_url: str | None) -> str:
    """DBOS's system database: the session store's PostgreSQL database."""
    if not store_url or not store_url.startswith(("postgresql://", "postgres://")):
        raise RunError("soul worker runs cycles from a PostgreSQL session store: set"
                       " SOUL_STORE=postgresql://USER@HOST/DATABASE (the SQLite default serves one process)")
    return "postgresql://" + store_url.split("://", 1)[1]


def route(store: SessionStore, soul: str, user: str, now: float | None = None,
          live: list[str] | None = None) -> str | None:
    """The worker (soul, user)'s turns go to; None when no worker of `soul` is alive."""
    at = time.time() if now is None else now
    workers = store.live_workers(soul, at) if live is None else live
    lease = store.lease(soul, user)
    if lease is not None and lease.live(at) and lease.owner in workers:
        return lease.owner
    return owner_of(shard_of(soul, user), workers)


class Sent(Protocol):
    """What a sender needs of a session (`soul.runtime.Session`): its id, and its info to update."""

    info: SessionInfo

    @property
    def id(self) -> str: ...


class TurnSender:
    """Sends a soul's user turns to the workers that own their partitions (see the module doc)."""

    def __init__(self, soul: str, store: Callable[[], SessionStore]) -> None:
        self.soul = soul
        self.store = store
        self._client: Any = None
        self.sent: set[tuple[str, int]] = set()  # (session, turn) this process is answered for

    def client(self) -> Any:
        """DBOS's client on the store's database (made on first use)."""
        if self._client is None:
            try:
                from dbos import DBOSClient
            except ImportError as exc:
                raise RunError("sending turns to workers needs DBOS: pip install 'soulgraph[durable]'") from exc
            self._client = DBOSClient(system_database_url=system_database_url(self.store().url),
                                      application_name=APPLICATION)
        return self._client

    def owner(self, user: str) -> str:
        """The worker this user's turns go to now; a RunError when none is alive."""
        found = route(self.store(), self.soul, user)
        if found is None:
            raise RunError(f"no `soul worker {self.soul}` is alive to run this turn (SOUL_RUNNER=dbos sends a memory"
                           f" soul's turns to the worker owning the user's memory): start one, or unset SOUL_RUNNER"
                           " to run turns in this process")
        return found

    async def send(self, session: Sent, text: str, emit: Callable[[Any], None] | None) -> TurnResult:
        """Run one user turn of `session` on its partition's worker; its result."""
        store = self.store()
        info = await asyncio.to_thread(store.session, session.id)
        base = info.turns
        self.sent.add((session.id, base + 1))
        owner = await asyncio.to_thread(self.owner, info.user)
        client = await asyncio.to_thread(self.client)
        options = {"queue_name": owner_queue(TURN_QUEUE, owner), "workflow_name": USER_TURN,
                   "workflow_id": user_turn_id(session.id, base, text), "queue_partition_key": session.id,
                   "application_name": APPLICATION}
        handle = await client.enqueue_async(options, self.soul, session.id, base, text)
        while True:
            try:
                data = await asyncio.wait_for(handle.get_result(polling_interval_sec=0.05), WATCH_SECONDS)
                break
            except TimeoutError:
                await self._rescue(handle, info.user)
        session.info = await asyncio.to_thread(store.session, session.id)
        result = TurnResult(reply=str(data["reply"]), session_id=session.id, turn=int(data["turn"]),
                            steps=dict(data.get("steps") or {}), kind=str(data.get("kind") or "message"))
        if emit is not None:
            emit(Reply(result.reply, False))
            emit(TurnCommitted(session.id, result.turn))
        return result

    async def _rescue(self, handle: Any, user: str) -> None:
        """A turn still waiting on the queue of a worker that died: moved to the partition's
        owner now (a survivor's takeover moves it too; whichever comes first)."""
        status = await handle.get_status()
        waiting_on = queue_owner(status.queue_name)
        if str(status.status) != "ENQUEUED" or waiting_on is None:
            return
        live = await asyncio.to_thread(self.store().live_workers, self.soul)
        if waiting_on in live:
            return
        owner = await asyncio.to_thread(self.owner, user)
        await asyncio.to_thread(self.client().resume_workflow, handle.get_workflow_id(),
                                queue_name=owner_queue(TURN_QUEUE, owner))

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.destroy()
