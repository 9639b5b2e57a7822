"""The HTTP and WebSocket API of `soul serve`, in process (Starlette's TestClient, no socket):
sessions, turns in `soul run --json`'s shape, the event stream, limits, the guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from serving import claudius_reply, conscious, cycle, write_script
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

import soul
from soul.cli.main import build_parser, main
from soul.cli.serve import build
from soul.providers import Chunk, ScriptedProvider
from soul.providers.base import Request
from soul.serve import MAX_MESSAGE_CHARS, Guard, ServeError, check_bind, create_app

JSON = {"content-type": "application/json"}
Client = Callable[..., TestClient]


@pytest.fixture
def client(tmp_path: Path, soul_home: Path) -> Any:
    """A TestClient on `soul serve SOUL --script FILE` built as the CLI builds it."""
    opened: list[tuple[Any, TestClient]] = []

    def make(soul_name: str, script: Any, *extra: str) -> TestClient:
        args = build_parser().parse_args(["serve", soul_name, "--script", str(write_script(tmp_path, script)), *extra])
        s, app, _ = build(args)
        test = TestClient(app, base_url="http://127.0.0.1:8765")
        test.__enter__()
        opened.append((s, test))
        return test

    yield make
    for s, test in opened:
        test.__exit__(None, None, None)
        s.close()


def test_sessions_are_created_listed_read_and_deleted(client: Client) -> None:
    api = client("claudius", [claudius_reply("Hello.")])
    made = api.post("/api/sessions", json={"user": "ada"})
    assert made.status_code == 201 and made.json()["user"] == "ada" and made.json()["turns"] == 0
    sid = made.json()["id"]
    assert [s["id"] for s in api.get("/api/sessions").json()] == [sid]
    turn = api.post(f"/api/sessions/{sid}/messages", json={"text": "hi"}).json()
    assert (turn["reply"], turn["turn"], turn["session"], turn["kind"]) == ("Hello.", 1, sid, "message")
    got = api.get(f"/api/sessions/{sid}").json()
    assert got["session"]["turns"] == 1
    assert [(m["tag"], m["content"]) for m in got["messages"] if m["layer"] == "external"] == [("user", "hi"), ("external_dialogue", "Hello.")]
    assert api.delete(f"/api/sessions/{sid}").json() == {"deleted": sid}
    assert api.get(f"/api/sessions/{sid}").status_code == 404
    assert api.get("/api/sessions").json() == []


def test_a_turns_json_has_the_shape_of_soul_run_json(client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = [claudius_reply("Same shape.")]
    api = client("claudius", script)
    sid = api.post("/api/sessions", json={}).json()["id"]
    served = api.post(f"/api/sessions/{sid}/messages", json={"text": "hi"}).json()
    assert main(["run", "claudius", "--script", str(write_script(tmp_path, script, "run.json")), "-m", "hi", "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert served.keys() == ran.keys()
    assert served["steps"].keys() == ran["steps"].keys() and served["trace"].keys() == ran["trace"].keys()
    assert served["steps"]["reply"] == ran["steps"]["reply"] and served["steps"]["think"] == ran["steps"]["think"]


def test_quiet_sections_stay_out_of_a_turns_json_unless_asked(client: Client) -> None:
    script = {"conscious": [conscious("Hi.", "quiet one"), conscious("Again.", "quiet two")], "subconscious": []}
    api = client("csd", script, "--cycles", "0")
    sid = api.post("/api/sessions", json={}).json()["id"]
    public = api.post(f"/api/sessions/{sid}/messages", json={"text": "hi"}).json()
    assert public["steps"]["respond"] == {"loud": "Hi."}
    shown = api.post(f"/api/sessions/{sid}/messages?thoughts=1", json={"text": "hi"}).json()
    assert shown["steps"]["respond"]["quiet"] == "quiet two"


def test_the_socket_sends_hello_then_every_event_of_a_turn(client: Client) -> None:
    api = client("claudius", [claudius_reply("Streamed.")])
    sid = api.post("/api/sessions", json={}).json()["id"]
    with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
        assert ws.receive_json()["type"] == "Hello"
        ws.send_json({"type": "message", "text": "hi"})
        events = []
        while not events or events[-1]["type"] != "TurnDone":
            events.append(ws.receive_json())
    types = [e["type"] for e in events]
    assert types[0] == "UserMessage" and "Token" in types and types[-3:] == ["Reply", "TurnCommitted", "TurnDone"]
    assert "".join(e["text"] for e in events if e["type"] == "Token") == "Streamed."
    done = events[-1]
    assert done["turn"]["reply"] == "Streamed." and done["server_ms"] >= done["provider_ms"] >= 0
    assert 0 < done["loop_ms"] <= done["server_ms"]  # the turn's own time on the loop, within its wall time


def test_the_background_can_be_paused_and_resumed_over_http(client: Client) -> None:
    api = client("csd", {"conscious": [], "subconscious": [cycle("calm", "be brief", "q")]}, "--cycles", "1")
    sid = api.post("/api/sessions", json={}).json()["id"]
    paused = api.post(f"/api/sessions/{sid}/pause", json={}).json()
    assert paused["loops"]["subconscious"]["status"] in ("paused", "done")
    resumed = api.post(f"/api/sessions/{sid}/resume", json={}).json()
    assert resumed["loops"]["subconscious"]["status"] in ("running", "done")


def test_limits_and_bad_requests_get_clear_errors(client: Client) -> None:
    api = client("claudius", [])
    sid = api.post("/api/sessions", json={}).json()["id"]
    too_long = api.post(f"/api/sessions/{sid}/messages", json={"text": "x" * (MAX_MESSAGE_CHARS + 1)})
    assert too_long.status_code == 413 and "limit" in too_long.json()["error"]
    huge = api.post(f"/api/sessions/{sid}/messages", content=b"{" + b" " * 300_000 + b"}", headers=JSON)
    assert huge.status_code == 413
    form = api.post(f"/api/sessions/{sid}/messages", content="text=hi", headers={"content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415  # a cross-site form cannot post JSON
    assert api.post(f"/api/sessions/{sid}/messages", json={"text": ""}).status_code == 400
    assert api.post(f"/api/sessions/{sid}/messages", content="[1]", headers=JSON).status_code == 400
    assert api.get("/api/sessions/nope").status_code == 404
    failed = api.post(f"/api/sessions/{sid}/messages", json={"text": "hi"})  # the script is empty
    assert failed.status_code == 422 and "ran out" in failed.json()["error"]
    with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
        ws.receive_json()
        ws.send_json({"type": "message", "text": "x" * (MAX_MESSAGE_CHARS + 1)})
        assert ws.receive_json()["code"] == "too_large"
        ws.send_text("not json")
        assert ws.receive_json()["code"] == "bad_request"


def test_another_sites_page_and_another_host_name_are_refused(client: Client) -> None:
    api = client("claudius", [])
    sid = api.post("/api/sessions", json={}).json()["id"]
    evil = api.post(f"/api/sessions/{sid}/messages", json={"text": "hi"}, headers={"origin": "http://evil.example"})
    assert evil.status_code == 403
    with pytest.raises(WebSocketDisconnect), api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events", headers={"origin": "http://evil.example"}):
        pass
    rebound = api.get("/api/sessions", headers={"host": "evil.example:8765"})
    assert rebound.status_code == 421  # DNS rebinding: a localhost server answers only localhost names
    own = api.post(f"/api/sessions/{sid}/pause", json={}, headers={"origin": "http://127.0.0.1:8765"})
    assert own.status_code == 200


def test_off_localhost_the_server_will_not_start_without_a_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ServeError, match="SOUL_SERVE_TOKEN"):
        check_bind("0.0.0.0", None)
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    monkeypatch.delenv("SOUL_SERVE_TOKEN", raising=False)
    assert main(["serve", "claudius", "--host", "0.0.0.0", "--port", "9"]) == 1  # refused before binding
    assert "SOUL_SERVE_TOKEN" in capsys.readouterr().err


def test_off_localhost_every_request_and_socket_needs_the_token(soul_home: Path) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("ok")]))
    app = create_app(s, lambda result, thoughts: result.to_json(), Guard("0.0.0.0", "sekrit-token-of-the-test-7Hq2"))
    with TestClient(app, base_url="http://192.0.2.10:8765") as api:  # a public address
        assert api.get("/").status_code == 200  # the page holds nothing; the API does
        assert api.get("/api/sessions").status_code == 401
        assert api.get("/api/sessions", headers={"authorization": "Bearer wrong"}).status_code == 401
        sid = api.post("/api/sessions?token=sekrit-token-of-the-test-7Hq2", json={}).json()["id"]
        with pytest.raises(WebSocketDisconnect), api.websocket_connect(f"ws://192.0.2.10:8765/api/sessions/{sid}/events"):
            pass
        with api.websocket_connect(f"ws://192.0.2.10:8765/api/sessions/{sid}/events?token=sekrit-token-of-the-test-7Hq2") as ws:
            assert ws.receive_json()["type"] == "Hello"
    s.close()


class SlowProvider(ScriptedProvider):
    """Scripted replies that take `delay` seconds to start: a turn long enough to walk away from."""

    def __init__(self, replies: list[str], delay: float) -> None:
        super().__init__(replies)
        self.delay = delay

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        await asyncio.sleep(self.delay)
        async for chunk in super().stream(request):
            yield chunk


def test_a_client_that_disconnects_mid_turn_loses_nothing(soul_home: Path) -> None:
    s = soul.load("claudius", provider=SlowProvider([claudius_reply("Committed anyway.")], 0.5))
    app = create_app(s, lambda result, thoughts: result.to_json(), Guard("127.0.0.1", None))
    with TestClient(app, base_url="http://127.0.0.1:8765") as api:
        sid = api.post("/api/sessions", json={}).json()["id"]
        with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
            ws.receive_json()
            ws.send_json({"type": "message", "text": "hi"})
            assert ws.receive_json()["type"] == "UserMessage"
        # gone mid-turn: the turn goes on to its commit, and the next connection sees it
        with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
            hello = ws.receive_json()
            seen = [m["content"] for m in hello["messages"]]
            while "Committed anyway." not in seen:
                event = ws.receive_json()
                if event["type"] == "Reply":
                    seen.append(event["text"])
        assert api.get(f"/api/sessions/{sid}").json()["session"]["turns"] == 1
    s.close()
