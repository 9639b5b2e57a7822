"""Two machines on one: two `soul worker claudius` processes with separate data homes (as two
machines have), one PostgreSQL, and this test as the process a user talks through
(`SOUL_RUNNER=dbos`: each turn goes to the worker that owns the user's memory partition).

The conversation's turns land on one worker, then on the other when a rebalance gives the
user's shard to the newcomer, and then back when the owner is SIGKILLed mid-turn: the survivor
takes its lease, finishes the turn it was running, and a new conversation of the same user
recalls what was said before the kill. Counted, from the store and the survivor's field:
memories lost (0 without shared storage too: every turn's memories are rebuilt from the
store's commits), turns lost (0), turns and cycles committed twice (0), turns run in-process
here (0: every turn was a worker's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import postgres_server
import pytest
from souls import claudius_reply

import soul
from soul.providers.scripted import ScriptedProvider
from soul.store import SessionStore
from soul.store.shards import owner_of, shard_of

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)

SAID = ["My lighthouse keeper is called Oswin Thale.", "The storm of 1911 took the north jetty.",
        "Oswin keeps a raven named Bartholomew.", "We still owe the harbour master forty shillings."]


def _script(folder: Path, seconds: float) -> Path:
    """Replies that each come `seconds` late, as a slow model's would: a kill lands mid-turn."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claudius-replies.json"
    replies = [{"text": claudius_reply(f"Noted, thing {i}.", check="false"), "seconds": seconds} for i in range(60)]
    path.write_text(json.dumps(replies))
    return path


def _worker(executor: str, home: Path, url: str, script: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SOUL_STORE": url, "SOUL_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("SOUL_RUNNER", None)
    return subprocess.Popen(
        [sys.executable, "-m", "soul.cli", "worker", "claudius", "--script", str(script), "--executor", executor,
         "--dead-after", "3", "--poll", "0.1", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait(what: str, check: object, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _status(url: str, workflow_prefix: str) -> list[tuple[str, str, str]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT workflow_uuid, status, coalesce(executor_id, '') FROM dbos.workflow_status"
            " WHERE workflow_uuid LIKE %s ORDER BY created_at", (workflow_prefix + "%",)).fetchall()]


def _epochs(root: Path, user: str) -> list[str]:
    from soul.runtime.bridges.partitions import user_folder

    base = root / "claudius" / "users" / user_folder(user)
    return sorted(p.name for p in base.iterdir() if not p.name.startswith(".")) if base.is_dir() else []


def _user_for(first: str, second: str) -> str:
    """A user whose shard the rendezvous gives to `second` once both are live."""
    for i in range(1000):
        user = f"ann-{i}"
        if owner_of(shard_of("claudius", user), sorted([first, second])) == second:
            return user
    raise AssertionError("no user hashes to the second worker")


@needs_server
@pytest.mark.slow
@pytest.mark.parametrize("storage", ["local", "shared"])
def test_a_conversation_across_two_machines_survives_its_owners_death(
        storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    shared = tmp_path / "shared-fields"  # a path every machine mounts (here: the same disk)
    if storage == "shared":
        monkeypatch.setenv("SOUL_SHARED_FIELDS", str(shared))
    else:
        monkeypatch.delenv("SOUL_SHARED_FIELDS", raising=False)
    run = f"tm{os.getpid()}x{int(time.time() * 1000) % 10**8}"  # DBOS's tables are shared by every test
    first, second = f"{run}-a", f"{run}-b"
    script = _script(tmp_path, seconds=1.0)
    store = SessionStore.open(tmp_path / "front", url=url)
    workers: list[subprocess.Popen[str]] = []
    try:
        workers.append(_worker(first, tmp_path / "machine-a", url, script))
        _wait("the first worker's heartbeat", lambda: store.live_workers("claudius") == [first])
        user = _user_for(first, second)

        front = soul.load("claudius", provider=ScriptedProvider([]), home=tmp_path / "front")
        talk = front.session(user=user, runner="dbos")
        assert talk.turns_sent is not None
        replies = [talk.turn_sync(SAID[0]), talk.turn_sync(SAID[1])]
        assert store.lease("claudius", user).owner == first  # the only worker: it owns the partition

        workers.append(_worker(second, tmp_path / "machine-b", url, script))  # a machine joins
        _wait("the first worker giving the partition up", lambda: store.lease("claudius", user).expires == 0.0)
        replies.append(talk.turn_sync(SAID[2]))
        lease = store.lease("claudius", user)
        assert (lease.owner, lease.epoch) == (second, 2)  # the newcomer owns it now: it rebuilt it

        # the owner dies mid-turn: SIGKILL while the turn's workflow runs on it
        import threading

        box: dict[str, object] = {}
        sender = threading.Thread(target=lambda: box.update(result=talk.turn_sync(SAID[3])))
        sender.start()
        prefix = f"soul-uturn:{talk.id}:3:"
        _wait("the fourth turn running on the owner", lambda: any(
            status == "PENDING" and executor == second for _, status, executor in _status(url, prefix)))
        workers[1].send_signal(signal.SIGKILL)
        workers[1].communicate()
        sender.join(timeout=120)
        assert not sender.is_alive(), "the turn the dead owner was running never finished"
        replies.append(box["result"])  # type: ignore[arg-type]
        lease = store.lease("claudius", user)
        assert (lease.owner, lease.epoch) == (first, 3)  # the survivor took the lease over
        assert [r.turn for r in replies] == [1, 2, 3, 4]

        # a new conversation of the same user, through `soul run` on a third data home: the
        # survivor runs it, and recalls what was said before the kill
        env = {**os.environ, "SOUL_STORE": url, "SOUL_HOME": str(tmp_path / "front-cli"), "SOUL_RUNNER": "dbos",
               "PYTHONPATH": os.pathsep.join(sys.path)}
        asked = subprocess.run(
            [sys.executable, "-m", "soul.cli", "run", "claudius", "--script", str(script), "--user", user, "--json",
             "-m", "Who keeps the lighthouse, and what do we owe?"],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        assert asked.returncode == 0, asked.stderr
        answer = json.loads(asked.stdout)
        recalled = json.dumps(answer["steps"]["recall"])
        assert "Oswin Thale" in recalled and "forty shillings" in recalled
        assert answer["reply"].startswith("Noted, thing")
        assert not (tmp_path / "front-cli" / "fields").exists()  # no field here: the worker ran the turn
        later = front.session(answer["session"])

        # counted
        commits = store.connection.execute(
            "SELECT c.session_id, c.turn, c.kind, c.remember FROM commits c JOIN sessions s ON s.id = c.session_id"
            " WHERE s.soul = 'claudius' AND s.user = ? ORDER BY c.id", (user,)).fetchall()
        turns = [(sid, turn) for sid, turn, kind, _ in commits if kind == "message"]
        assert turns == [(talk.id, n) for n in range(1, 5)] + [(later.id, 1)]  # none lost, none twice
        assert not [kind for _, _, kind, _ in commits if kind == "cycle"]  # claudius runs no cycles
        runs = _status(url, f"soul-uturn:{talk.id}:")
        assert len(runs) == 4 and all(status == "SUCCESS" for _, status, _ in runs)
        remembered = [item["text"] for *_, items in commits if items for item in json.loads(items)]
        survivor = soul.load("claudius", provider=ScriptedProvider([]), home=tmp_path / "machine-a")
        workers[0].send_signal(signal.SIGTERM)  # the survivor stops, giving its lease up: we read its field
        workers[0].communicate(timeout=60)
        field = survivor.memory_field(user)
        held = [field.get(mid).content for mid in field.store.state.rows]
        lost = [text for text in remembered if text not in held]
        assert lost == []  # memories lost: 0, with shared storage or without
        assert sorted(held) == sorted(remembered)  # and none written twice
        folders = {home: _epochs(home / "fields", user) for home in (tmp_path / "machine-a", tmp_path / "machine-b")}
        if storage == "shared":  # each owner started from the last one's folder; only the newest is left
            assert _epochs(shared, user) == ["e4"] and folders == {tmp_path / "machine-a": [], tmp_path / "machine-b": []}
        else:  # b rebuilt epoch 2 from the store; a copied its own epoch 1 into 3 and caught up
            assert folders == {tmp_path / "machine-a": ["e4"], tmp_path / "machine-b": ["e2"]}
        survivor.close()
        front.close()
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.communicate()
        store.close()
