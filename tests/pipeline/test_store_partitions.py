"""Memory partitions in the session store, on both backends: one owner at a time through a
lease taken and renewed in one statement, a fence epoch that rises when the owner changes, a
commit under a lease that has moved on refused whole, and the memories a partition is rebuilt
from. Shards: each session's stored with it, and workers joining or leaving move the fewest."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import postgres_server
import pytest
from store_backends import backend, store_url  # noqa: F401 - the fixtures

from soul.errors import LeaseLost
from soul.records import Commit, Fence, MessageRecord
from soul.store import SessionStore
from soul.store.shards import SHARDS, assignment, moves, owner_of, shard_of, share


@pytest.fixture
def store(soul_home: Path, store_url: str | None) -> Iterator[SessionStore]:  # noqa: F811
    s = SessionStore.open(soul_home)
    yield s
    s.close()


def test_a_lease_has_one_owner_until_it_lapses_and_the_epoch_rises_with_each_new_owner(store: SessionStore) -> None:
    first = store.take_lease("claudius", "ann", "w1", ttl=30, now=100.0)
    assert first is not None and (first.owner, first.epoch, first.expires) == ("w1", 1, 130.0)
    assert store.take_lease("claudius", "ann", "w2", ttl=30, now=120.0) is None  # w1's, still live
    renewed = store.take_lease("claudius", "ann", "w1", ttl=30, now=125.0)
    assert renewed is not None and (renewed.epoch, renewed.expires, renewed.taken) == (1, 155.0, 100.0)
    assert store.take_lease("claudius", "ann", "w2", ttl=30, now=150.0) is None
    taken = store.take_lease("claudius", "ann", "w2", ttl=30, now=156.0)  # lapsed at 155
    assert taken is not None and (taken.owner, taken.epoch, taken.taken) == ("w2", 2, 156.0)
    assert store.lease("claudius", "ann") == taken
    assert store.take_lease("claudius", "bob", "w1", ttl=30, now=156.0).epoch == 1  # another partition
    back = store.take_lease("claudius", "ann", "w1", ttl=30, now=200.0)
    assert back is not None and back.epoch == 3  # w1 again, but after w2: a new epoch


def test_renewing_touches_only_the_leases_still_held_and_releasing_frees_them_now(store: SessionStore) -> None:
    store.take_lease("claudius", "ann", "w1", ttl=10, now=100.0)
    store.take_lease("claudius", "bob", "w1", ttl=10, now=100.0)
    store.take_lease("claudius", "cy", "w2", ttl=10, now=100.0)
    assert store.renew_leases("w1", [("claudius", "ann"), ("claudius", "cy")], ttl=10, now=105.0) == 1
    assert store.lease("claudius", "ann").expires == 115.0
    assert store.lease("claudius", "bob").expires == 110.0
    assert store.lease("claudius", "cy").owner == "w2"  # not w1's: untouched
    assert store.release_leases("w1", [("claudius", "bob")]) == 1
    assert store.take_lease("claudius", "bob", "w2", ttl=10, now=106.0).epoch == 2
    assert store.release_leases("w1") == 1  # ann
    assert set(store.leases("claudius")) == {"ann", "bob", "cy"}
    assert store.leases("claudius", ["ann"])["ann"].expires == 0.0


def _turn(sid: str, base: int, text: str, fence: Fence | None = None) -> Commit:
    return Commit(session_id=sid, base_turn=base, messages=(MessageRecord("external", "user", text),),
                  remember=({"text": f"ann: {text}", "kind": "episode"},), fence=fence)


def test_a_commit_under_a_lease_that_moved_on_is_refused_whole(store: SessionStore) -> None:
    sid = store.create_session("claudius", "ann").id
    lease = store.take_lease("claudius", "ann", "w1", ttl=10, now=100.0)
    applied = store.apply(_turn(sid, 0, "the lighthouse keeper", lease.fence))
    assert applied.turn == 1 and applied.commit_id > 0
    store.take_lease("claudius", "ann", "w2", ttl=10, now=1e12)  # w1's lapsed: w2 takes it
    with pytest.raises(LeaseLost, match="claudius/ann: w1's lease \\(epoch 1\\) has moved on \\(w2 holds epoch 2\\)"):
        store.apply(_turn(sid, 1, "a late word", lease.fence))
    assert store.session(sid).turns == 1
    assert [m.content for _, m, _ in store.messages(sid)] == ["the lighthouse keeper"]
    with pytest.raises(LeaseLost, match="nobody holds it"):
        store.apply(_turn(sid, 1, "x", Fence("claudius", "zed", "w1", 1)))


def test_a_partition_is_rebuilt_from_the_items_its_turns_recorded_in_commit_order(store: SessionStore) -> None:
    ann1 = store.create_session("claudius", "ann").id
    bob = store.create_session("claudius", "bob").id
    ann2 = store.create_session("claudius", "ann").id
    store.commit(_turn(ann1, 0, "one"))
    store.commit(_turn(bob, 0, "not ann's"))
    store.commit(_turn(ann2, 0, "two"))
    store.commit(Commit(session_id=ann1, base_turn=1, messages=(MessageRecord("external", "user", "none"),)))
    store.commit(_turn(ann1, 2, "three"))
    found = list(store.partition_memories("claudius", "ann"))
    assert [(sid, [i["text"] for i in items]) for _, sid, items in found] == [
        (ann1, ["ann: one"]), (ann2, ["ann: two"]), (ann1, ["ann: three"])]
    assert [cid for cid, _, _ in found] == sorted(cid for cid, _, _ in found)


def test_sessions_carry_their_shard_and_a_worker_reads_only_its_shards(store: SessionStore) -> None:
    ann = store.create_session("claudius", "ann").id
    bob = store.create_session("claudius", "bob").id
    marks = {m.id: m for m in store.session_marks("claudius")}
    assert (marks[ann].user, marks[bob].user) == ("ann", "bob")
    assert [m.id for m in store.session_marks("claudius", {shard_of("claudius", "ann")})] == [ann]
    assert store.session_marks("claudius", set()) == []


def test_a_forked_or_imported_session_lands_in_its_users_shard(store: SessionStore) -> None:
    ann = store.create_session("claudius", "ann").id
    store.commit(_turn(ann, 0, "one"))
    store.commit(_turn(ann, 1, "two"))
    mine = {shard_of("claudius", "ann")}
    fork = store.fork_session(ann, 1).id
    assert {m.id for m in store.session_marks("claudius", mine)} == {ann, fork}
    # the fork's copies of ann's turns are not remembered into the partition a second time
    assert [(sid, [i["text"] for i in items]) for _, sid, items in store.partition_memories("claudius", "ann")] == [
        (ann, ["ann: one"]), (ann, ["ann: two"])]
    dump = store.dump_session(fork)
    store.delete_session(fork)
    assert store.load_sessions([dump]) == [fork]
    assert {m.id for m in store.session_marks("claudius", mine)} == {ann, fork}


def test_live_workers_follow_each_workers_own_dead_after(store: SessionStore) -> None:
    store.beat("w1", "claudius", now=100.0, dead_after=5.0)
    store.beat("w2", "claudius", now=100.0, dead_after=60.0)
    store.beat("w3", "csd", now=100.0)
    assert store.live_workers("claudius", now=104.0) == ["w1", "w2"]
    assert store.live_workers("claudius", now=106.0) == ["w2"]
    store.take_over("w1", dead_before=200.0)  # w1 claims w2
    assert store.live_workers("claudius", now=106.0) == []


def test_claiming_a_dead_worker_lets_its_leases_lapse_at_once(store: SessionStore) -> None:
    sid = store.create_session("claudius", "ann").id
    store.beat("w1", "claudius", now=100.0)
    store.beat("w2", "claudius", now=100.0)
    # w1 renewed its lease mid-turn after its last beat: the lease outlives the beat's deadline
    old = store.take_lease("claudius", "ann", "w1", ttl=30, now=105.0)
    store.take_lease("claudius", "bob", "w2", ttl=30, now=105.0)
    store.beat("w2", "claudius", now=131.0)
    assert store.take_over("w2", dead_before=131.0 - 30) == ["w1"]
    taken = store.take_lease("claudius", "ann", "w2", ttl=30, now=131.0)  # not at 135: now
    assert taken is not None and (taken.owner, taken.epoch) == ("w2", 2)
    assert store.lease("claudius", "bob").expires == 135.0  # the survivor's own: untouched
    with pytest.raises(LeaseLost):  # the dead worker's late commit, should it come back
        store.apply(_turn(sid, 0, "a late word", old.fence))


@pytest.mark.parametrize("backend", ["postgresql"])
def test_two_processes_racing_for_a_lapsed_lease_one_gets_it(soul_home: Path, store_url: str | None) -> None:  # noqa: F811
    stores = [SessionStore.open(soul_home) for _ in range(4)]
    for round_ in range(10):
        barrier = threading.Barrier(len(stores))
        won: list[str] = []

        def take(i: int, round_: int = round_, barrier: threading.Barrier = barrier, won: list[str] = won) -> None:
            barrier.wait()
            if stores[i].take_lease("claudius", "ann", f"w{i}", ttl=1, now=1000.0 * (round_ + 1)) is not None:
                won.append(f"w{i}")

        threads = [threading.Thread(target=take, args=(i,)) for i in range(len(stores))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, won
        assert stores[0].lease("claudius", "ann").owner == won[0]
    for s in stores:
        s.close()
    assert postgres_server.binaries() is not None


# -- shards: pure ---------------------------------------------------------------------------


def test_shards_spread_over_workers_and_a_join_or_leave_moves_only_what_it_must() -> None:
    three = [f"worker-{i}" for i in range(3)]
    before = assignment(three)
    counts = {w: sum(1 for o in before.values() if o == w) for w in three}
    assert all(abs(c - SHARDS / 3) < SHARDS / 3 * 0.2 for c in counts.values()), counts
    assert share("worker-0", three) == {s for s, o in before.items() if o == "worker-0"}
    joined = assignment([*three, "worker-3"])
    moved = moves(before, joined)
    assert moved == sum(1 for o in joined.values() if o == "worker-3")  # only to the newcomer
    assert abs(moved - SHARDS / 4) < SHARDS / 4 * 0.25
    left = assignment(three[1:])
    assert moves(before, left) == counts["worker-0"]  # only the leaver's shards move
    assert owner_of(5, []) is None and assignment([]) == {}
    assert shard_of("claudius", "ann") == shard_of("claudius", "ann") != shard_of("csd", "ann")
