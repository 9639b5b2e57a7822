"""Looking at a session does not start paid work that never ends (issue 24.3): a session's
background loops stop when its last client has left and the grace has passed with no turn, a
dialogue opened through the API closes the same way, and the server holds a bounded number
open, refusing more with a clear error."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import Server, claudius_reply, conscious, csd_folder, cycle, write_script
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

import soul
from soul.cli.main import build_parser
from soul.cli.serve import build
from soul.providers import ScriptedProvider
from soul.serve import Guard, create_app

WS = "ws://127.0.0.1:8765"


def commits(home: Path, session_id: str) -> int:
    """How many commits (turns and background cycles: each a model call) the session has."""
    with sqlite3.connect(home / "soul.db") as db:
        return int(db.execute("SELECT count(*) FROM commits WHERE session_id = ?", (session_id,)).fetchone()[0])


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture
def busy_csd(tmp_path: Path) -> Iterator[Server]:
    """`soul serve` on a csd whose subconscious cycles every 0.1 s on a long script (every
    cycle a model call), with a grace of 0.5 s; stopped at the end."""
    blueprint = csd_folder(tmp_path / "csd", loop="interval", interval_seconds=0.1)
    script = {"conscious": [conscious("Hello again.", "q")] * 3000,
              "subconscious": [cycle("calm", "be brief", "a thought")] * 3000}
    server = Server(str(blueprint), tmp_path / "home", "--script", str(write_script(tmp_path, script)),
                    "--idle-grace", "0.5").wait()
    yield server
    server.stop()


def test_after_every_client_leaves_and_the_grace_passes_no_model_is_called(busy_csd: Server, tmp_path: Path) -> None:
    home = tmp_path / "home"
    http = httpx.Client(base_url=busy_csd.url)
    watched = [http.post("/api/sessions", json={}).json()["id"] for _ in range(3)]
    talked = http.post("/api/sessions", json={}).json()["id"]

    async def watch_then_leave() -> None:
        import websockets

        sockets = [await websockets.connect(f"ws://127.0.0.1:{busy_csd.port}/api/sessions/{sid}/events", max_queue=None)
                   for sid in watched]  # (a client that reads everything, as the page does)
        for ws in sockets:
            assert json.loads(await ws.recv())["type"] == "Hello"
        await asyncio.sleep(1.0)  # looking at them starts their loops
        for ws in sockets:
            await ws.close()

    asyncio.run(watch_then_leave())
    assert all(commits(home, sid) > 0 for sid in watched)  # the loops ran while watched
    assert http.post(f"/api/sessions/{talked}/messages", json={"text": "hi"}).status_code == 200  # no socket at all
    assert wait_until(lambda: commits(home, talked) > 1, 5)  # its loops started with the turn
    time.sleep(1.5)  # the grace (0.5 s) passes: every hub closes, its loops stop
    before = {sid: commits(home, sid) for sid in [*watched, talked]}
    time.sleep(2.0)
    assert {sid: commits(home, sid) for sid in before} == before  # no cycle, no model call since

    async def come_back() -> None:
        import websockets

        async with websockets.connect(f"ws://127.0.0.1:{busy_csd.port}/api/sessions/{watched[0]}/events", max_queue=None) as ws:
            assert json.loads(await ws.recv())["type"] == "Hello"
            await asyncio.sleep(1.0)

    asyncio.run(come_back())
    assert commits(home, watched[0]) > before[watched[0]]  # a client back: the loops run again
    http.close()


@pytest.fixture
def claudius_app(soul_home: Path) -> Iterator[Callable[..., tuple[TestClient, Any]]]:
    opened: list[tuple[Any, TestClient]] = []

    def make(**options: Any) -> tuple[TestClient, Any]:
        s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("ok")] * 10))
        app = create_app(s, lambda result, thoughts: result.to_json(), Guard("127.0.0.1", None), **options)
        client = TestClient(app, base_url="http://127.0.0.1:8765")
        client.__enter__()
        opened.append((s, client))
        return client, app

    yield make
    for s, client in opened:
        client.__exit__(None, None, None)
        s.close()


def test_past_the_bound_a_session_is_refused_with_a_clear_error_until_one_is_left_alone(claudius_app: Any) -> None:
    api, app = claudius_app(max_sessions=2, idle_grace=60)
    sids = [api.post("/api/sessions", json={}).json()["id"] for _ in range(3)]
    with api.websocket_connect(f"{WS}/api/sessions/{sids[0]}/events") as first, \
            api.websocket_connect(f"{WS}/api/sessions/{sids[1]}/events") as second:
        assert first.receive_json()["type"] == second.receive_json()["type"] == "Hello"
        with api.websocket_connect(f"{WS}/api/sessions/{sids[2]}/events") as third:
            refused = third.receive_json()
            assert (refused["type"], refused["code"]) == ("Error", "too_many_sessions")
            assert "--max-sessions" in refused["error"]
            with pytest.raises(WebSocketDisconnect) as closed:
                third.receive_json()
            assert closed.value.code == 1013
        answer = api.post(f"/api/sessions/{sids[2]}/messages", json={"text": "hi"})
        assert answer.status_code == 503 and answer.json()["code"] == "too_many_sessions"
        assert answer.headers["retry-after"] == "60"
        assert sorted(app.app.state.hubs.open) == sorted(sids[:2])
    # both left: the idlest makes room at once, the grace notwithstanding
    assert api.post(f"/api/sessions/{sids[2]}/messages", json={"text": "hi"}).json()["reply"] == "ok"
    assert len(app.app.state.hubs.open) == 2 and sids[2] in app.app.state.hubs.open


def test_an_idle_session_closes_after_the_grace_and_a_paused_one_reopens_paused(tmp_path: Path, soul_home: Path) -> None:
    blueprint = csd_folder(tmp_path / "csd", loop="interval", interval_seconds=600)
    script = write_script(tmp_path, {"conscious": [], "subconscious": [cycle("calm", "be brief", "q")] * 5})
    s, app, _ = build(build_parser().parse_args(["serve", str(blueprint), "--script", str(script), "--idle-grace", "0.3"]))
    hubs = app.app.state.hubs
    with TestClient(app, base_url="http://127.0.0.1:8765") as api:
        sid = api.post("/api/sessions", json={}).json()["id"]
        paused = api.post(f"/api/sessions/{sid}/pause", json={}).json()
        assert paused["loops"]["subconscious"]["status"] == "paused" and sid in hubs.open
        assert wait_until(lambda: sid not in hubs.open, 5)  # nobody watches it: closed
        assert app.app.state.keeper.closed >= 1
        with api.websocket_connect(f"{WS}/api/sessions/{sid}/events") as ws:
            hello = ws.receive_json()
            assert hello["background"]["loops"]["subconscious"]["status"] == "paused"  # as the client left it
            time.sleep(0.6)
            assert sid in hubs.open  # watched: kept past the grace
        api.post(f"/api/sessions/{sid}/resume", json={})
        assert wait_until(lambda: sid not in hubs.open, 5)
        assert sid not in hubs.paused
    s.close()


def test_a_dialogue_opened_through_the_api_closes_after_the_grace(tmp_path: Path, soul_home: Path) -> None:
    from test_dialogue_api import SCRIPT

    args = build_parser().parse_args(["serve", "entelgia", "--script", str(write_script(tmp_path, SCRIPT)), "--idle-grace", "0.3"])
    s, app, _ = build(args)
    dialogues = app.app.state.dialogues
    with TestClient(app, base_url="http://127.0.0.1:8765") as api:
        did = api.post("/api/dialogues", json={}).json()["id"]
        assert did in dialogues.open
        api.post(f"/api/dialogues/{did}/step", json={"turns": 2, "wait": False})
        assert wait_until(lambda: did not in dialogues.open, 10)  # its run ended, nobody watches: closed
        again = api.get(f"/api/dialogues/{did}").json()  # reopened from its file
        assert again["dialogue"]["turns"] == 2 and did in dialogues.open
    s.close()


def test_the_grace_and_the_bound_are_options_of_soul_serve() -> None:
    args = build_parser().parse_args(["serve", "csd", "--idle-grace", "2.5", "--max-sessions", "7"])
    assert (args.idle_grace, args.max_sessions) == (2.5, 7)
    defaults = build_parser().parse_args(["serve", "csd"])
    assert (defaults.idle_grace, defaults.max_sessions) == (60.0, 500)
    for bad in (["--idle-grace", "-1"], ["--idle-grace", "nan"], ["--max-sessions", "0"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["serve", "csd", *bad])
