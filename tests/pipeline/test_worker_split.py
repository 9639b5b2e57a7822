"""`soul worker`'s split of the sessions (real PostgreSQL, no DBOS launched: the scheduler's own
part): each worker reads only the sessions of its shards, the live workers' shards cover every
session once, and a worker joining or leaving moves only the shards it takes or gives up."""

from __future__ import annotations

from pathlib import Path

import postgres_server
import pytest
from test_durable import csd_folder

import soul
from soul.runtime.durable.engine import Engine
from soul.runtime.durable.recovery import Heartbeat
from soul.runtime.durable.worker import Worker
from soul.store import SessionStore
from soul.store.shards import SHARDS

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)


def _worker(s: soul.Soul, url: str, store: SessionStore, executor: str) -> Worker:
    engine = Engine(s, url, executor=executor)  # not launched: only its name is used here
    return Worker(s, engine, store, heartbeat=Heartbeat(store, engine, executor, s.name, dead_after=10))


@needs_server
def test_workers_split_the_sessions_and_a_join_or_leave_moves_the_fewest_shards(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    s = soul.load(csd_folder(tmp_path), home=soul_home)
    sessions = {s.session(user=f"user-{i}").id for i in range(300)}
    store = SessionStore.open(soul_home, url=url)
    now = 1_000_000.0
    a, b = _worker(s, url, store, "w-a"), _worker(s, url, store, "w-b")
    store.beat("w-b", s.name, now, dead_after=10)
    a.heartbeat.tick(now)
    b.heartbeat.tick(now)
    assert a.heartbeat.live == b.heartbeat.live == ["w-a", "w-b"]
    shards = {w.engine.executor: w._split() for w in (a, b)}
    assert not shards["w-a"] & shards["w-b"] and len(shards["w-a"] | shards["w-b"]) == SHARDS
    polled = {name: {m.id for m in store.session_marks(s.name, mine)} for name, mine in shards.items()}
    assert not polled["w-a"] & polled["w-b"] and polled["w-a"] | polled["w-b"] == sessions
    assert all(len(ids) > len(sessions) / 4 for ids in polled.values())  # each reads its part only

    c = _worker(s, url, store, "w-c")  # a third machine joins
    for w in (c, a, b):
        w.heartbeat.tick(now + 5)
    joined = {w.engine.executor: w._split() for w in (a, b, c)}
    assert a.moved + b.moved == len(joined["w-c"])  # only what the newcomer takes moves
    assert joined["w-a"] <= shards["w-a"] and joined["w-b"] <= shards["w-b"]
    assert abs(len(joined["w-c"]) - SHARDS / 3) < SHARDS / 3 * 0.2

    # b stops beating: dead after 10 s, claimed (its workflows would be recovered: DBOS's part,
    # tests/pipeline/test_durable_recovery.py; claimed here by an id none of these heartbeats
    # has, since a heartbeat recovers what its executor holds at each beat, and these engines
    # are not launched), and its shards move
    store.beat("w-a", s.name, now + 16, dead_after=10)
    store.beat("w-c", s.name, now + 16, dead_after=10)
    assert store.take_over("w-claimant", now + 6) == ["w-b"]
    for w in (a, c):
        w.heartbeat.tick(now + 16)
    assert "w-b" not in a.heartbeat.live + c.heartbeat.live
    before = (a.moved, c.moved)
    left = {w.engine.executor: w._split() for w in (a, c)}
    assert left["w-a"] | left["w-c"] == set(range(SHARDS))
    assert (a.moved - before[0]) + (c.moved - before[1]) == len(joined["w-b"])  # only b's shards
    store.close()
    s.close()


@needs_server
def test_a_partitions_turns_go_to_its_live_lease_holder_else_to_its_shards_worker(soul_home: Path) -> None:
    from soul.runtime.routing import owner_queue, queue_owner, route, user_turn_id, workflow_session
    from soul.store.shards import owner_of, shard_of

    store = SessionStore.open(soul_home, url=postgres_server.fresh_url())
    now = 5_000.0
    assert route(store, "claudius", "ann", now) is None  # no worker alive
    store.beat("w1", "claudius", now, dead_after=10)
    store.beat("w2", "claudius", now, dead_after=10)
    by_shard = owner_of(shard_of("claudius", "ann"), ["w1", "w2"])
    other = "w1" if by_shard == "w2" else "w2"
    assert route(store, "claudius", "ann", now) == by_shard
    store.take_lease("claudius", "ann", other, ttl=10, now=now)  # sticky: the holder keeps its turns
    assert route(store, "claudius", "ann", now + 1) == other
    store.beat("w1", "claudius", now + 11, dead_after=10)
    store.beat("w2", "claudius", now + 11, dead_after=10)
    assert route(store, "claudius", "ann", now + 11) == by_shard  # its lease lapsed
    store.take_lease("claudius", "ann", other, ttl=30, now=now + 11)
    store.beat(by_shard, "claudius", now + 22, dead_after=10)
    assert route(store, "claudius", "ann", now + 12) == other
    assert route(store, "claudius", "ann", now + 22) == by_shard  # the holder is dead (silent 11 s)
    store.release_leases(other)
    store.take_lease("claudius", "ann", "proc:h:1:x", ttl=60, now=now + 22)  # an in-process holder
    assert route(store, "claudius", "ann", now + 23) == by_shard  # no queue of its own: the worker gets it
    assert queue_owner(owner_queue("soul-turns", "w1")) == "w1" and queue_owner("soul-turns") is None
    wid = user_turn_id("s1", 3, "hello")
    assert wid.startswith("soul-uturn:s1:3:") and wid == user_turn_id("s1", 3, "hello") != user_turn_id("s1", 3, "hullo")
    assert [workflow_session(w) for w in (wid, "soul-cycle:s2:sub:4", "soul-turn:s3:t:k", "other:x:y")] == ["s1", "s2", "s3", None]
    store.close()
