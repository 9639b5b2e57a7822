"""A dead worker's in-flight cycles taken over by a surviving worker with another executor id
(heartbeat rows in the store, DBOS's own recovery), on a real PostgreSQL: killing one of two
workers mid-cycle leaves every cycle applied exactly once."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import postgres_server
import pytest
from test_durable import _cycles, _dbos_launched, _env, _pending, _worker, csd_folder

import soul
from soul.store import SessionStore

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)


@needs_server
def test_a_silent_worker_is_claimed_by_one_survivor_and_owns_its_id_again_when_it_beats(soul_home: Path) -> None:
    url = postgres_server.fresh_url()
    first, second = SessionStore.open(soul_home, url=url), SessionStore.open(soul_home, url=url)
    first.beat("w1", "csd", now=100.0)
    first.beat("w2", "csd", now=130.0)
    second.beat("w3", "csd", now=130.0)
    assert first.take_over("w2", dead_before=110.0) == ["w1"]
    assert second.take_over("w3", dead_before=110.0) == []  # claimed already: one survivor only
    assert {b.executor: b.taken_by for b in first.worker_beats()} == {"w1": "w2", "w2": None, "w3": None}
    first.beat("w1", "csd", now=140.0)  # restarted with its id: its own again
    assert {b.executor: b.taken_by for b in second.worker_beats()}["w1"] is None
    first.close()
    second.close()


def _pending_of(url: str, executor: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if not _dbos_launched(conn):
            return 0
        return int(conn.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = %s",
            (executor,)).fetchone()[0])


def _csd_sessions(tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> tuple[str, Path, list[str]]:
    """A fresh PostgreSQL schema as the store, a scripted csd soul, and `n` sessions of it."""
    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    blueprint = csd_folder(tmp_path)
    s = soul.load(blueprint, home=soul_home)
    sessions = [s.session().id for _ in range(n)]
    s.close()
    return url, blueprint, sessions


def _each_cycle_once(url: str, sessions: list[str], target: int) -> None:
    """Every session has cycles 1..target, each applied once, and nothing is left PENDING."""
    for sid in sessions:
        assert _cycles(url, sid) == {n: 1 for n in range(1, target + 1)}
    assert _pending(url, sessions) == 0


@needs_server
@pytest.mark.slow
def test_killing_one_of_two_workers_mid_cycle_leaves_every_cycle_applied_once(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, blueprint, sessions = _csd_sessions(tmp_path, soul_home, monkeypatch, 3)
    env, target = _env(url, soul_home), 30
    args = ("--cycles", str(target), "--dead-after", "2")
    dead, alive = "recovery-dead", "recovery-alive"  # DBOS's tables are shared by every test
    survivor = _worker(blueprint, env, *args, "--executor", alive)
    try:
        killed = False
        for _ in range(8):  # kill w1 until a kill lands inside one of its cycles
            victim = _worker(blueprint, env, *args, "--executor", dead)
            deadline = time.monotonic() + 60
            while _pending_of(url, dead) == 0 and victim.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            victim.send_signal(signal.SIGKILL)
            victim.communicate()
            if _pending_of(url, dead):
                killed = True
                break
        assert killed, f"no kill landed inside a cycle of {dead}"
        _out, err = survivor.communicate(timeout=300)  # only the survivor is left to finish
    finally:  # a failed wait leaves no worker running on after the test
        if survivor.poll() is None:
            survivor.kill()
            survivor.communicate()
    assert survivor.returncode == 0, err
    _each_cycle_once(url, sessions, target)
    check = SessionStore.open(soul_home, url=url)
    assert {b.executor: b.taken_by for b in check.worker_beats()}[dead] == alive
    check.close()


@needs_server
def test_a_worker_restarted_with_a_taken_id_owns_it_before_it_runs_anything(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a worker killed between its engine's launch and its first beat left what it had picked up
    # pending under an id a survivor had claimed before (its restart never cleared the claim), and
    # no survivor claims a taken id again: the cycles hung (seen once in CI, two suites at once).
    # Its id is its own before the engine launches (the banner comes after the launch).
    url, blueprint, _sessions = _csd_sessions(tmp_path, soul_home, monkeypatch, 1)
    store = SessionStore.open(soul_home, url=url)
    store.beat("restarted", "csd", now=time.time() - 60)
    assert store.take_over("survivor", dead_before=time.time()) == ["restarted"]
    worker = _worker(blueprint, _env(url, soul_home), "--cycles", "1", "--dead-after", "2", "--executor", "restarted")
    try:
        assert worker.stdout is not None
        banner = worker.stdout.readline()
        worker.send_signal(signal.SIGSTOP)  # nothing more of it runs while the row is read
        assert "executor 'restarted'" in banner, banner
        assert {b.executor: b.taken_by for b in store.worker_beats()}["restarted"] is None
    finally:
        worker.kill()
        worker.communicate()
        store.close()


@needs_server
def test_a_worker_is_seen_live_only_once_turns_can_be_enqueued_to_it(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a process sending turns enqueues them with DBOS's client as soon as it sees a live worker,
    # and the client creates no tables: a worker that beat before its launch had made them was
    # sent a turn into a missing table on a fresh database (seen in CI: test_two_machines)
    import psycopg

    url, blueprint, _sessions = _csd_sessions(tmp_path, soul_home, monkeypatch, 1)
    store = SessionStore.open(soul_home, url=url)
    worker = _worker(blueprint, _env(url, soul_home), "--cycles", "1", "--dead-after", "2", "--executor", "fresh")
    try:
        deadline = time.monotonic() + 60
        while "fresh" not in store.live_workers("csd"):
            assert time.monotonic() < deadline and worker.poll() is None, "the worker never beat"
            time.sleep(0.005)
        worker.send_signal(signal.SIGSTOP)  # nothing more of it runs while the tables are looked for
        with psycopg.connect(url, autocommit=True) as conn:
            assert _dbos_launched(conn), "the worker was live before DBOS's tables were made"
    finally:
        worker.kill()
        worker.communicate()
        store.close()


@needs_server
@pytest.mark.slow
def test_what_a_taken_over_worker_runs_before_it_dies_is_recovered(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a worker taken over while only stalled went on running cycles under its id and died
    # before beating again (a beat makes the id its own): the survivor had recovered its work
    # once, when it claimed it, and the cycles run after that stayed PENDING (seen in CI as a
    # hung recovery test, the victim's beat late under load). Here the victim never beats
    # (--dead-after 0): the survivor claims its id first, the victim runs, dies mid-cycle.
    url, blueprint, sessions = _csd_sessions(tmp_path, soul_home, monkeypatch, 3)
    # the cycles paced (at most `rate` a second across the workers), so the survivor cannot run
    # them all before a victim has started, however slow the machine is (seen in CI: under
    # load every victim found nothing left to run)
    env, target, rate = _env(url, soul_home), 16, ("--rate", "6/1")
    stalled, alive = "stalled", "taker"
    store = SessionStore.open(soul_home, url=url)
    store.beat(stalled, "csd", now=time.time() - 60)
    survivor = _worker(blueprint, env, "--cycles", str(target), "--dead-after", "2", "--executor", alive, *rate)
    try:
        deadline = time.monotonic() + 60
        while {b.executor: b.taken_by for b in store.worker_beats()}.get(stalled) != alive:
            assert time.monotonic() < deadline and survivor.poll() is None, "the survivor never claimed the silent id"
            time.sleep(0.05)
        killed = False
        for _ in range(8):  # until a kill lands inside one of the victim's cycles
            victim = _worker(blueprint, env, "--cycles", str(target), "--dead-after", "0", "--executor", stalled, *rate)
            deadline = time.monotonic() + 60
            while _pending_of(url, stalled) == 0 and victim.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            # (read before the kill: the survivor re-enqueues what is left within a beat of it)
            killed = victim.poll() is None and _pending_of(url, stalled) > 0
            victim.send_signal(signal.SIGKILL)
            victim.communicate()
            if killed:
                break
        assert killed, f"no kill landed inside a cycle of {stalled}"
        _out, err = survivor.communicate(timeout=120)
    finally:
        if survivor.poll() is None:
            survivor.kill()
            survivor.communicate()
        store.close()
    assert survivor.returncode == 0, err
    _each_cycle_once(url, sessions, target)
