"""The server answers every request (issue 24.9): deeply nested JSON bodies and huge turn
numbers get a 4xx with a message, binary or deeply nested WebSocket frames a close frame with a
reason, slow or half-sent headers time out, and the connections it holds are bounded."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import claudius_reply
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

import soul
from soul.providers import ScriptedProvider
from soul.serve import Guard, create_app
from soul.serve.transport import uvicorn_config

NESTED = "[" * 100_000 + "]" * 100_000  # well under the body limit, far past JSON's depth


@pytest.fixture
def api(soul_home: Path) -> Iterator[TestClient]:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("ok")] * 4))
    app = create_app(s, lambda result, thoughts: result.to_json(), Guard("127.0.0.1", None))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        yield client
    s.close()


@pytest.mark.parametrize("body", [NESTED, '{"text": ' + NESTED[:-1] + "}", '{"user": {"a": ' * 15_000])
def test_a_deeply_nested_body_is_a_400_with_a_message(api: TestClient, body: str) -> None:
    sid = api.post("/api/sessions", json={}).json()["id"]
    for path in ("/api/sessions", f"/api/sessions/{sid}/messages", f"/api/sessions/{sid}/recall"):
        answer = api.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= answer.status_code < 500, (path, answer.status_code)
        assert answer.json()["code"] == "bad_json" and answer.json()["error"]


@pytest.mark.parametrize("turn", ["9223372036854775808", "99999999999999999999999999999999", "1" + "0" * 400])
def test_a_huge_turn_number_is_a_404_with_a_message(api: TestClient, turn: str) -> None:
    sid = api.post("/api/sessions", json={}).json()["id"]
    answer = api.get(f"/api/sessions/{sid}/turns/{turn}/trace")
    assert answer.status_code == 404 and "no turn" in answer.json()["error"]
    assert api.get(f"/api/sessions/{sid}/turns/9223372036854775807/trace").status_code == 404


def test_a_binary_frame_closes_the_socket_with_a_reason(api: TestClient) -> None:
    sid = api.post("/api/sessions", json={}).json()["id"]
    with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
        assert ws.receive_json()["type"] == "Hello"
        ws.send_bytes(b"\x00\x01binary")
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1003 and "text frames" in str(closed.value.reason)


def test_a_deeply_nested_frame_closes_the_socket_with_a_reason(api: TestClient) -> None:
    sid = api.post("/api/sessions", json={}).json()["id"]
    with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
        assert ws.receive_json()["type"] == "Hello"
        ws.send_text(NESTED)
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1007 and "nests too deeply" in str(closed.value.reason)


def test_a_frame_that_is_not_a_request_is_answered_and_the_socket_stays(api: TestClient) -> None:
    sid = api.post("/api/sessions", json={}).json()["id"]
    with api.websocket_connect(f"ws://127.0.0.1:8765/api/sessions/{sid}/events") as ws:
        assert ws.receive_json()["type"] == "Hello"
        ws.send_text("[1, 2")
        assert ws.receive_json()["code"] == "bad_request"
        ws.send_json({"type": "pause"})  # still served


class Running:
    """A real uvicorn server on 127.0.0.1 in a thread, configured as `soul serve` does."""

    def __init__(self, app: Any, **options: Any) -> None:
        import uvicorn

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", self.port, max_size=1 << 20, **options))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


@pytest.fixture
def running(soul_home: Path) -> Iterator[Any]:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply("ok")] * 4))
    app = create_app(s, lambda result, thoughts: result.to_json(), Guard("127.0.0.1", None))
    started: list[Running] = []

    def start(**options: Any) -> Running:
        started.append(Running(app, **options))
        return started[-1]

    yield start
    for server in started:
        server.stop()
    s.close()


def closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing `sock`, or None if it is still open after `seconds`."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return None
    return got


def test_slow_and_half_sent_headers_time_out(running: Any) -> None:
    server = running(header_seconds=0.5)
    silent = socket.create_connection(("127.0.0.1", server.port))
    half = socket.create_connection(("127.0.0.1", server.port))
    half.sendall(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    drip = socket.create_connection(("127.0.0.1", server.port))
    started, dripped = time.monotonic(), 0
    with contextlib.suppress(OSError):  # the server closes it mid-drip
        for ch in b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1":  # a byte every 0.1 s
            drip.sendall(bytes([ch]))
            dripped += 1
            time.sleep(0.1)
    assert dripped < 30, "a client sending a byte now and then kept its connection"
    assert time.monotonic() - started < 4
    for sock in (silent, half, drip):
        answer = closed_within(sock, 3.0)
        assert answer is not None, "the server held a connection whose headers never came"
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408")
        sock.close()
    # a request sent at once is served as before, and a keep-alive connection stays usable
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as client:
        assert client.get("/api/sessions").status_code == 200
        assert client.get("/api/sessions").status_code == 200


def test_connections_past_the_bound_are_refused_sockets_included(running: Any) -> None:
    server = running(max_connections=3, header_seconds=30)

    async def go() -> list[int]:
        import websockets

        async with httpx.AsyncClient() as client:
            made = await client.post(f"http://127.0.0.1:{server.port}/api/sessions", json={})
        url = f"ws://127.0.0.1:{server.port}/api/sessions/{made.json()['id']}/events"
        held = [await websockets.connect(url) for _ in range(2)]
        for ws in held:
            assert '"Hello"' in await ws.recv()  # open, watching the session
        codes = []
        try:
            try:
                extra = await websockets.connect(url)
                await extra.close()
                codes.append(101)
            except websockets.InvalidStatus as refused:
                codes.append(refused.response.status_code)
            async with httpx.AsyncClient() as client:
                codes.append((await client.get(f"http://127.0.0.1:{server.port}/api/sessions")).status_code)
        finally:
            for ws in held:
                with contextlib.suppress(Exception):
                    await ws.close()
        await asyncio.sleep(0.2)
        async with httpx.AsyncClient() as client:
            codes.append((await client.get(f"http://127.0.0.1:{server.port}/api/sessions")).status_code)
        return codes

    assert asyncio.run(go()) == [503, 503, 200]


def test_a_half_sent_body_times_out_with_408(running: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import soul.serve.app as served

    monkeypatch.setattr(served, "BODY_SECONDS", 0.5)
    server = running()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                 b"content-length: 100\r\n\r\n{\"user\":")
    answer = closed_within(sock, 5.0)
    sock.close()
    assert answer is not None and answer.startswith(b"HTTP/1.1 408") and b"slow_body" in answer
