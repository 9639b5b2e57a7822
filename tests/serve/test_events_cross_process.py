"""Events across processes: what a `soul worker` commits reaches the WebSocket clients of every
`soul serve` process on the same PostgreSQL (LISTEN/NOTIFY of commit ids, rows read back), as
the event types `Session.stream`/`subscribe` give; nothing of it on SQLite."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import postgres_server
import pytest
from serving import Server
from speaking_csd import csd

import soul
from soul.serve.hub import Hubs
from soul.serve.relay import start_relay

needs_server = pytest.mark.skipif(postgres_server.binaries() is None, reason=postgres_server.SKIP_REASON)


def received(ws: Any, until: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Events from a socket until one of type `until` with spontaneous set (or the timeout)."""
    import time

    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        except TimeoutError:
            break
        events.append(event)
        if event.get("type") == until and event.get("spontaneous"):
            break
    return events


@needs_server
@pytest.mark.slow
def test_a_worker_spontaneous_message_reaches_a_websocket_client_of_each_of_two_servers(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from websockets.sync.client import connect

    url = postgres_server.fresh_url()
    blueprint = csd(tmp_path)
    monkeypatch.setenv("SOUL_STORE", url)
    s = soul.load(blueprint, home=soul_home)
    sid = s.session().id
    s.close()
    env = {"SOUL_STORE": url, "SOUL_RUNNER": "dbos", "PYTHONPATH": os.pathsep.join(sys.path)}
    servers = [Server(str(blueprint), tmp_path / f"home{i}", env=env) for i in (1, 2)]
    with contextlib.ExitStack() as stack:
        for server in servers:
            stack.callback(server.stop)
        for server in servers:
            server.wait()
        sockets = [stack.enter_context(connect(f"ws://127.0.0.1:{server.port}/api/sessions/{sid}/events"))
                   for server in servers]
        for ws in sockets:
            assert json.loads(ws.recv(timeout=30))["type"] == "Hello"
        worker = subprocess.run(
            [sys.executable, "-m", "soul.cli", "worker", str(blueprint), "--poll", "0.05", "--cycles", "1"],
            env={**os.environ, **env, "SOUL_HOME": str(soul_home)}, capture_output=True, text=True, timeout=180,
            check=False,
        )
        assert worker.returncode == 0, worker.stderr
        for ws in sockets:
            events = received(ws, "Reply")
            types = [e["type"] for e in events]
            assert {"CycleFinished", "MoodChanged", "ImpulseQueued", "Reply"} <= set(types), types
            impulse = next(e for e in events if e["type"] == "ImpulseQueued")
            assert (impulse["cycle"], impulse["text"], impulse["trigger"]) == (1, "tell them about the sea", True)
            reply = next(e for e in events if e["type"] == "Reply")
            assert reply == {"type": "Reply", "text": "I was thinking of the sea.", "spontaneous": True}
            mood = next(e for e in events if e["type"] == "MoodChanged")
            assert (mood["mood"], mood["criteria"]) == ("eager", "speak")


def test_no_relay_listens_when_the_store_is_sqlite(tmp_path: Path, soul_home: Path) -> None:
    s = soul.load(csd(tmp_path), home=soul_home)

    async def go() -> Any:
        return start_relay(s, Hubs(s, lambda result, thoughts: {}))

    assert s.store.backend == "sqlite"
    assert asyncio.run(go()) is None
    s.close()


@needs_server
def test_another_servers_user_turn_reaches_this_servers_clients_and_its_own_commits_are_not_echoed(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from soul.serve.relay import Relay
    from soul.store.notify import ORIGIN, Notice

    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    monkeypatch.setenv("SOUL_RUNNER", "dbos")  # the hub's session runs no loop of its own
    s = soul.load(csd(tmp_path), home=soul_home)
    session = s.session()
    session.turn_sync("what are you thinking of?")
    commit = s.store.traces(session.id)[-1]["commit"]

    async def go() -> list[dict[str, Any]]:
        hubs = Hubs(s, lambda result, thoughts: {})
        hub = await hubs.get(session.id)
        client = hub.attach()
        relay = Relay(url, s.name, hubs, asyncio.get_running_loop())
        relay._heard(Notice(session.id, commit, ORIGIN))  # this process's own: already announced
        relay._heard(Notice(session.id, commit, "another-server"))
        relay._heard(Notice("no-such-session", commit, "another-server"))  # nobody watches it
        await asyncio.sleep(0.05)  # the events are queued on the loop by call_soon_threadsafe
        relay.stop()
        events = []
        while not client.queue.empty():
            events.append(json.loads(client.queue.get_nowait()))
        await hubs.close()
        return events

    everything = asyncio.run(go())
    steps = [e for e in everything if e["type"] in ("StepStarted", "StepFinished")]
    assert steps and steps[0]["type"] == "StepStarted"  # the turn's steps, as its own server sent them
    assert {e["step"] for e in steps} == set(s.plan.turn.steps)
    events = [e for e in everything if e not in steps]
    assert [e["type"] for e in events] == ["UserMessage", "Reply", "TurnCommitted"]
    assert everything.index(events[0]) == 0 and everything[-2:] == events[1:]
    assert events[0]["text"] == "what are you thinking of?"
    assert events[1] == {"type": "Reply", "text": "I was thinking of the sea.", "spontaneous": False}
    assert events[2] == {"type": "TurnCommitted", "session_id": session.id, "turn": 1}
    s.close()


@needs_server
def test_the_listener_comes_back_after_its_connection_is_cut_and_says_it_may_have_missed_notices() -> None:
    import time

    import psycopg

    from soul.store import Listener, Notice, channel

    url = postgres_server.fresh_url()
    heard: list[Notice | None] = []
    name = channel(f"relay-test-{os.getpid()}")
    listener = Listener(url, name, heard.append).start()
    assert listener.wait_listening()

    def send(commit: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (name, Notice("s1", commit, "elsewhere").payload))

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 20
        while len(heard) < count and time.monotonic() < deadline:
            time.sleep(0.02)

    try:
        send(1)
        wait_for(1)
        with psycopg.connect(url, autocommit=True) as conn:  # cut the listener's connection
            cut = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
                               (f'LISTEN "{name}"',)).fetchall()
        assert cut
        wait_for(2)  # the None that says "reconnected"
        assert listener.wait_listening()
        send(2)
        wait_for(3)
    finally:
        listener.stop()
    assert heard == [Notice("s1", 1, "elsewhere"), None, Notice("s1", 2, "elsewhere")]


def _worker_cycle(blueprint: Path, home: Path, session_id: str, number: int) -> int:
    """Run cycle `number` of `session_id` with the worker's own code (`Background.run_cycle`,
    what a DBOS cycle workflow runs) on a soul and connection of its own; the commit's id."""
    from soul.runtime.background.cycles import Background

    worker = soul.load(blueprint, home=home)
    try:
        work = Background(worker.plan, worker.services, worker.store, session_id, lambda event: None,
                          lambda trigger, reason: asyncio.sleep(0))
        assert asyncio.run(work.run_cycle("subconscious", number)) is True
        return max(t["commit"] for t in worker.store.traces(session_id) if t["kind"].startswith("cycle"))
    finally:
        worker.close()


@needs_server
def test_a_client_attaching_sees_the_mood_and_cycle_workers_committed_since_its_hub_opened(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    from soul.cli.main import build_parser
    from soul.cli.serve import build

    monkeypatch.setenv("SOUL_STORE", postgres_server.fresh_url())
    monkeypatch.setenv("SOUL_RUNNER", "dbos")  # the hub's session runs no loop of its own
    blueprint = csd(tmp_path)
    s, app, _ = build(build_parser().parse_args(["serve", str(blueprint)]))
    sid = s.session().id
    try:
        with TestClient(app, base_url="http://127.0.0.1:8765") as api:
            with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
                before = ws.receive_json()["background"]  # the hub opens with the session
            # committed by this process, so the relay (which skips its own process's notices)
            # cannot be what refreshes the hub: attaching must
            _worker_cycle(blueprint, soul_home, sid, 1)
            with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
                hello = ws.receive_json()
            got = api.get(f"/api/sessions/{sid}").json()["background"]
    finally:
        s.close()
    assert (before["cycle"], before["mood"], before["pending"]) == (0, "", [])
    after = hello["background"]
    assert hello["type"] == "Hello"
    assert (after["cycle"], after["mood"], after["criteria"]) == (1, "eager", "speak")
    assert after["pending"] == ["tell them about the sea"]
    assert got == after


@needs_server
def test_the_relay_puts_a_worker_cycles_mood_in_place_before_its_clients_hear_of_it(
        tmp_path: Path, soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from soul.serve.relay import Relay
    from soul.store.notify import Notice

    url = postgres_server.fresh_url()
    monkeypatch.setenv("SOUL_STORE", url)
    monkeypatch.setenv("SOUL_RUNNER", "dbos")
    blueprint = csd(tmp_path)
    s = soul.load(blueprint, home=soul_home)
    sid = s.session().id

    async def go() -> tuple[list[tuple[int, str, int]], list[dict[str, Any]]]:
        hubs = Hubs(s, lambda result, thoughts: {})
        hub = await hubs.get(sid)
        client = hub.attach()
        relay = Relay(url, s.name, hubs, asyncio.get_running_loop())
        minds = [(hub.session.mind.cycle, hub.session.mind.mood, len(hub.session.mind.pending))]
        commit = await asyncio.to_thread(_worker_cycle, blueprint, soul_home, sid, 1)
        minds.append((hub.session.mind.cycle, hub.session.mind.mood, len(hub.session.mind.pending)))
        relay._heard(Notice(sid, commit, "a-worker"))
        await asyncio.sleep(0.05)  # minds and events are handed over by call_soon_threadsafe
        minds.append((hub.session.mind.cycle, hub.session.mind.mood, len(hub.session.mind.pending)))
        relay.stop()
        events = []
        while not client.queue.empty():
            events.append(json.loads(client.queue.get_nowait()))
        await hubs.close()
        return minds, events

    minds, events = asyncio.run(go())
    s.close()
    assert minds == [(0, "", 0), (0, "", 0), (1, "eager", 1)]  # stale until the relay heard it
    assert [e["type"] for e in events] == ["CycleFinished", "MoodChanged", "ImpulseQueued"]
    assert (events[1]["mood"], events[2]["text"], events[2]["pending"]) == ("eager", "tell them about the sea", 1)


@needs_server
def test_pause_and_resume_of_a_worker_run_session_say_the_loops_run_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    from soul.cli.main import build_parser
    from soul.cli.serve import build

    monkeypatch.setenv("SOUL_STORE", postgres_server.fresh_url())
    monkeypatch.setenv("SOUL_RUNNER", "dbos")  # `soul worker` runs the loops, not this server
    s, app, _ = build(build_parser().parse_args(["serve", str(csd(tmp_path))]))
    sid = s.session().id
    try:
        with TestClient(app, base_url="http://127.0.0.1:8765") as api:
            for verb in ("pause", "resume"):
                answer = api.post(f"/api/sessions/{sid}/{verb}")
                assert answer.status_code == 409
                assert answer.json()["code"] == "loops_in_workers"
                assert "soul worker" in answer.json()["error"]
            with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
                assert ws.receive_json()["type"] == "Hello"
                ws.send_json({"type": "pause"})
                said = ws.receive_json()
    finally:
        s.close()
    assert (said["type"], said["code"]) == ("Error", "loops_in_workers")
