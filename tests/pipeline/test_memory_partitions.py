"""A memory soul's field on a PostgreSQL store: one partition per user, owned by one process at a
time under a lease; a new owner on another data home (another machine) gets the partition back
from the store's committed turns, or from shared storage; a stale owner's late writes are
refused. Real PostgreSQL, the real resonance engine, a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import postgres_server
import pytest
from souls import claudius_reply

import soul
from soul.errors import LeaseHeld, LeaseLost
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges.partitions import STATE, user_folder
from soul.store import SessionStore

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)

SAID = ["My lighthouse keeper is called Oswin Thale.", "The storm of 1911 took the north jetty.",
        "Oswin keeps a raven named Bartholomew.", "We still owe the harbour master forty shillings."]


def _soul(home: Path) -> soul.Soul:
    replies = [claudius_reply(f"Noted, the {i}th thing.", check="false") for i in range(40)]
    return soul.load("claudius", provider=ScriptedProvider(replies), home=home)


def _recalled(result: soul.TurnResult) -> str:
    return json.dumps(result.steps.get("recall", {}))


def _partition_folders(home: Path, user: str) -> list[str]:
    base = home / "fields" / "claudius" / "users" / user_folder(user)
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> str:
    if postgres_server.binaries() is None:
        pytest.skip(postgres_server.SKIP_REASON)
    chosen = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", chosen)
    monkeypatch.delenv("SOUL_SHARED_FIELDS", raising=False)
    return chosen


@needs_server
def test_a_second_machine_rebuilds_the_users_partition_from_the_store_and_recalls_it(
        url: str, tmp_path: Path) -> None:
    first = _soul(tmp_path / "machine-a")
    session = first.session(user="ann")
    for text in SAID[:3]:
        session.turn_sync(text)
    assert _partition_folders(tmp_path / "machine-a", "ann") == ["e1"]
    before = len(first.memory_field("ann"))
    first.close()  # gives the lease up

    second = _soul(tmp_path / "machine-b")  # another data home: nothing of ann's field on disk
    later = second.session(user="ann")  # a new conversation: recall skips this one's own turns
    result = later.turn_sync("Who keeps the lighthouse, and what is the raven's name?")
    recalled = _recalled(result)
    assert "Oswin Thale" in recalled and "Bartholomew" in recalled
    part = second.memory.for_user("ann")._partition
    assert part.lease.epoch == 2 and part.lease.owner == second.memory.partitions().owner
    assert part.progress.source == "empty" and part.progress.commits == 3 and part.progress.rate > 0
    assert len(second.memory_field("ann")) == before + 1  # the three turns rebuilt, plus this one's
    marks = json.loads((part.folder() / STATE).read_text())["sessions"]
    assert set(marks) == {session.id, later.id}
    store = SessionStore.open(tmp_path / "x", url=url)
    assert marks[later.id] == max(cid for cid, _, _ in store.partition_memories("claudius", "ann"))
    store.close()
    second.close()


@needs_server
def test_one_owner_at_a_time_and_a_stale_owners_late_writes_are_refused(url: str, tmp_path: Path) -> None:
    first, second = _soul(tmp_path / "a"), _soul(tmp_path / "b")
    session = first.session(user="ann")
    session.turn_sync(SAID[0])
    with pytest.raises(LeaseHeld, match=r"claudius/ann is owned by proc:.*SOUL_RUNNER=dbos"):
        second.session(session.id).turn_sync("mine now?")
    other = second.session(user="bob")  # another user's partition: free
    other.turn_sync("Hello from bob, who has nothing to do with Oswin.")

    # first's lease lapses (as if its machine stalled), and second takes the partition
    store = SessionStore.open(tmp_path / "x", url=url)
    owner_a = first.memory.partitions().owner
    assert store.release_leases(owner_a) == 1
    second.session(session.id).turn_sync(SAID[1])
    assert store.lease("claudius", "ann").epoch == 2

    bridge = first.memory.for_user("ann")  # the stale owner wakes up with epoch 1 in hand
    stale_fence = bridge._partition.lease.fence
    with pytest.raises(LeaseLost, match="epoch 1"):
        bridge.remember([{"text": "A late memory nobody may merge.", "kind": "episode"}], session.id, 999)
    from soul.records import Commit, MessageRecord

    with pytest.raises(LeaseLost):
        store.apply(Commit(session_id=session.id, base_turn=2, messages=(MessageRecord("external", "user", "late"),),
                           fence=stale_fence))
    with pytest.raises(LeaseHeld):
        first.session(session.id).turn_sync("let me in")
    assert store.session(session.id).turns == 2
    texts = [h.text for h in second.memory_field("ann").recall("late memory nobody may merge", 10)]
    assert not any("late memory" in t for t in texts)
    store.close()
    first.close()
    second.close()


@needs_server
def test_with_shared_storage_the_new_owner_starts_from_the_old_owners_folder(
        url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    monkeypatch.setenv("SOUL_SHARED_FIELDS", str(shared))
    first = _soul(tmp_path / "a")
    session = first.session(user="ann")
    for text in SAID:
        session.turn_sync(text)
    field = first.memory_field("ann")
    memory_id = field.recall("forty shillings harbour master", 1)[0].id
    field.feedback(memory_id, True)  # learned state: only shared storage carries it across
    confidence = field.get(memory_id).confidence
    first.close()

    second = _soul(tmp_path / "b")
    result = second.session(user="ann").turn_sync("What do we owe?")
    assert "forty shillings" in _recalled(result)
    part = second.memory.for_user("ann")._partition
    assert (part.progress.source, part.progress.copied_from, part.progress.commits) == ("copied", 1, 0)
    assert second.memory_field("ann").get(memory_id).confidence == confidence
    base = shared / "claudius" / "users" / user_folder("ann")
    assert sorted(p.name for p in base.iterdir()) == ["e2"]  # epoch 1's folder is done with
    assert not (tmp_path / "b" / "fields" / "claudius" / "users").exists()
    second.close()


def test_user_ids_become_one_safe_path_component() -> None:
    assert user_folder("ann").startswith("ann-")
    for hostile in ("../../etc", "a/b", ".hidden", "", "x" * 500, "ann\x00", "日本"):
        name = user_folder(hostile)
        assert "/" not in name and not name.startswith(".") and len(name) < 60 and name != user_folder("ann")
    assert user_folder("a/b") != user_folder("a_b")
