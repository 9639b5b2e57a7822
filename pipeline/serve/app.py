"""The ASGI app of `soul serve`: the page, the HTTP API, the WebSocket of a session's events.

Transport only: every route calls the Python API (`Soul`, `Session`, `SessionStore`) and
returns what it gives, as JSON. The routes (docs/serve.md has the table):

    GET    /                                  the page (static, shipped as package data)
    GET    /api/soul                          the soul and which panels have something to show
    GET    /api/sessions                      this soul's sessions, newest first
    POST   /api/sessions                      a new session {"user": "..."}
    GET    /api/sessions/{id}                 its info, newest 500 messages, background state
    DELETE /api/sessions/{id}                 delete it
    POST   /api/sessions/{id}/messages        {"text": "..."} → the turn's JSON (`soul run --json`)
    POST   /api/sessions/{id}/pause|resume    the background loops
    GET    /api/sessions/{id}/turns/{n}/trace the stored trace of turn n
    GET    /api/sessions/{id}/chetana         Chetana's cognitive report (`soul chetana --json`)
    ...    /api/sessions/{id}/layers|user-model/...|commits|turns/{n}/window|cost|fork
                                              inspecting and forking (serve/inspect_api.py)
    POST   /api/sessions/{id}/recall          {"query": "..."} → memories with their explanation
    WS     /api/sessions/{id}/events          Hello, then every event as JSON with `type`
    ...    /api/dialogues[/{id}[/step|pause|events]]  a dialogue soul's runs (serve/dialogue_api.py)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from soul.errors import LeaseHeld, RunError, SessionNotFound, SoulError
from soul.runtime import refresh_minds
from soul.serve import frames, views, wire
from soul.serve.dialogues import DialogueRefused, Dialogues
from soul.serve.guard import MAX_BODY_BYTES, MAX_MESSAGE_CHARS, Guard, Lockout
from soul.serve.hub import Hubs, TurnError, TurnJson, send_queued
from soul.serve.idle import IDLE_GRACE, MAX_OPEN, Keeper, TooManyOpen
from soul.store import redact, redact_data

log = logging.getLogger(__name__)

STATIC = resources.files("soul.serve") / "static"
BODY_SECONDS = 30.0  # a request body must arrive within this (its headers: serve/transport.py)
MAX_TURN = 2**63 - 1  # the largest turn number a store holds
# No inline script or style, no other origin: model text that slipped into markup could run nothing.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",  # a ?token= in the page's URL stays on this page
    "cache-control": "no-store",
}


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": redact(message), "code": code}, status, headers=SECURITY_HEADERS)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(redact_data(data), status, headers=SECURITY_HEADERS)


class GuardMiddleware:
    """Host, token and Origin checks on the API and the socket; security headers on all."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app, self.guard = app, guard
        self.lockout = Lockout()  # wrong tokens per client address

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        from urllib.parse import parse_qsl

        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        path: str = scope["path"]
        refusal = None
        if not self.guard.host_ok(headers):
            refusal = (421, "bad_host", "this server answers only to localhost names (the Host header was another)")
        elif path.startswith("/api/") and self.guard.token is not None:
            refusal = self._token_refusal(scope, headers, query)
        writes = scope["type"] == "websocket" or scope.get("method") not in ("GET", "HEAD")
        if refusal is None and writes and not self.guard.origin_ok(headers):
            refusal = (403, "origin", "requests from another site's page are refused (the Origin is not this server)")
        if refusal is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await receive()  # websocket.connect; closing before accept answers HTTP 403
            await send({"type": "websocket.close", "code": 1008, "reason": refusal[2][:120]})
            return
        response = _error(*refusal[:3])
        if len(refusal) > 3:
            response.headers["retry-after"] = refusal[3]
        await response(scope, receive, send)

    def _token_refusal(self, scope: Scope, headers: dict[str, str], query: dict[str, str]) -> tuple[Any, ...] | None:
        """None when the request carries the token and its address is not locked out; else
        (status, code, message[, retry-after])."""
        address = (scope.get("client") or ("?",))[0]
        wait = self.lockout.wait(address)
        if wait <= 0:
            if self.guard.token_ok(headers, query):
                self.lockout.succeeded(address)
                return None
            self.lockout.failed(address)
            wait = self.lockout.wait(address)
            if wait <= 0:
                return (401, "token", "this server needs its token: `Authorization: Bearer $SOUL_SERVE_TOKEN` or ?token=")
        seconds = math.ceil(wait)
        return (429, "token_lockout", f"too many wrong tokens from this address: try again in {seconds} s", str(seconds))


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object, refused when too large, not JSON, or not an object."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise Refused(415, "content_type", "send the body as JSON with `Content-Type: application/json`")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise Refused(413, "too_large", f"the request body is {int(declared):,} bytes; the limit is {MAX_BODY_BYTES:,}")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise Refused(413, "too_large", f"the request body is over the limit of {MAX_BODY_BYTES:,} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise Refused(408, "slow_body", f"the request body did not arrive within {BODY_SECONDS:.0f} s") from None
    try:
        data = json.loads(b"".join(chunks) or b"{}")
    except ValueError as exc:
        raise Refused(400, "bad_json", f"the body is not valid JSON: {exc}") from exc
    except RecursionError:
        raise Refused(400, "bad_json", "the body's JSON nests too deeply") from None
    if not isinstance(data, dict):
        raise Refused(400, "bad_json", "the body must be a JSON object")
    return data


def message_text(data: dict[str, Any]) -> str:
    """The `text` of a message, checked: a string, not empty, at most MAX_MESSAGE_CHARS."""
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise Refused(400, "no_text", 'send {"text": "your message"} (a non-empty string)')
    if len(text) > MAX_MESSAGE_CHARS:
        raise Refused(413, "too_large", f"the message is {len(text):,} characters; the limit is {MAX_MESSAGE_CHARS:,}")
    return text


def create_app(soul: Any, turn_json: TurnJson, guard: Guard, *, cycles: int | None = None,
               open_runner: Any = None, idle_grace: float = IDLE_GRACE, max_sessions: int = MAX_OPEN) -> Starlette:
    """The app serving `soul`: `turn_json(result, thoughts)` shapes a turn's JSON (the CLI
    passes `soul run --json`'s), `guard` the host and token, `cycles` bounds each session's
    background loops (a scripted run ends by itself; None: until its hub closes),
    `open_runner(resume=, seed=)` opens a `DialogueRunner` for a dialogue soul (None: no
    dialogues); a session or dialogue nobody uses for `idle_grace` seconds is closed (its
    loops stop), and at most `max_sessions` are open at once (serve/idle.py)."""
    from soul.serve import dialogue_api, inspect_api

    keeper = Keeper(idle_grace, max_sessions)
    hubs = Hubs(soul, turn_json, cycles, keeper)
    dialogues = Dialogues(soul.name, open_runner, keeper) if open_runner is not None else None

    def handled(endpoint: Any) -> Any:
        async def run(request: Request) -> Response:
            try:
                return await endpoint(request)  # type: ignore[no-any-return]
            except (Refused, DialogueRefused, inspect_api.InspectRefused) as exc:
                refused = _error(exc.status, exc.code, exc.message)
                if exc.status in (408, 413):  # a body left unread: the connection cannot be reused
                    refused.headers["connection"] = "close"
                return refused
            except (SessionNotFound, RunError) as exc:  # RunError: another soul's session
                return _error(404, "no_session", str(exc))
            except TurnError as exc:
                return _error(422 if exc.user_error else 500, "turn_failed", exc.message)
            except TooManyOpen as exc:
                crowded = _error(exc.status, exc.code, exc.message)
                crowded.headers["retry-after"] = str(exc.retry_after)
                return crowded
            except SoulError as exc:
                return _error(422, "error", str(exc))
        return run

    async def index(request: Request) -> Response:
        return FileResponse(str(STATIC / "index.html"), headers=SECURITY_HEADERS)

    async def soul_info(request: Request) -> Response:
        return _json(views.soul_view(soul))

    async def sessions(request: Request) -> Response:
        if request.method == "POST":
            data = await _body(request)
            user = data.get("user") or "user"
            if not isinstance(user, str) or len(user) > 200:
                raise Refused(400, "bad_user", "`user` is a name of at most 200 characters")
            return _json(views.session_info(hubs.create(user)), 201)
        return _json([views.session_info(i) for i in soul.store.sessions(soul.name)])

    def own(session_id: str) -> Any:
        info = soul.store.session(session_id)
        if info.soul != soul.name:
            raise Refused(404, "no_session", f"session {session_id} belongs to soul '{info.soul}', not '{soul.name}'")
        return info

    async def one_session(request: Request) -> Response:
        sid = request.path_params["id"]
        info = own(sid)
        if request.method == "DELETE":
            await hubs.delete(sid)
            return _json({"deleted": sid})
        hub = hubs.open.get(sid)
        if hub is not None:
            refresh_minds(hub.session)  # loops run in workers: their mood and cycle now
        return _json(views.session_view(soul.store, info, hub.session if hub else None))

    async def messages(request: Request) -> Response:
        sid = request.path_params["id"]
        own(sid)
        text = message_text(await _body(request))
        hub = await hubs.get(sid)
        thoughts = request.query_params.get("thoughts") in ("1", "true")
        return _json(await hub.turn(text, thoughts))

    async def steer(request: Request) -> Response:
        sid = request.path_params["id"]
        own(sid)
        hub = await hubs.get(sid)
        if (elsewhere := loops_elsewhere(hub.session)) is not None:
            return _error(409, "loops_in_workers", elsewhere)
        hubs.steer(hub, pause=request.url.path.endswith("/pause"))
        return _json(views.background_view(hub.session) or {"loops": {}})

    async def trace(request: Request) -> Response:
        sid = request.path_params["id"]
        info = own(sid)
        turn = int(request.path_params["turn"])  # digits only (the route); any length
        if not 0 < turn <= info.turns:  # a huge number never reaches the store's 64-bit column
            raise Refused(404, "no_turn", f"session {sid} has no turn {turn if turn <= MAX_TURN else 'that large'}:"
                                          f" its turns are 1 to {info.turns}")
        return _json(soul.store.trace(sid, turn))

    async def chetana(request: Request) -> Response:
        sid = request.path_params["id"]
        own(sid)
        from soul.runtime import session_report

        return _json(session_report(soul.store, sid).to_dict())

    async def recall(request: Request) -> Response:
        sid = request.path_params["id"]
        own(sid)
        data = await _body(request)
        query = data.get("query")
        if not isinstance(query, str) or not query.strip() or len(query) > MAX_MESSAGE_CHARS:
            raise Refused(400, "no_query", f'send {{"query": "..."}} (a non-empty string of at most {MAX_MESSAGE_CHARS:,} characters)')
        if not soul.blueprint.memory:
            raise Refused(404, "no_memory", f"{soul.name} has no `memory:` block: nothing is recalled")
        k = (soul.blueprint.memory.get("recall") or {}).get("k") or 5
        user = soul.store.session(sid).user  # on PostgreSQL the field is the user's partition (docs/scale.md)
        try:
            hits = await asyncio.to_thread(lambda: soul.memory_field(user).resonate(query, int(k), session=sid, explain=True))
        except LeaseHeld as exc:
            raise Refused(409, "memory_elsewhere", str(exc)) from None
        return _json([{"id": h.id, "text": h.text, "score": h.score, "kind": h.kind, "components": h.components} for h in hits])

    async def events(ws: WebSocket) -> None:
        sid = ws.path_params["id"]
        await ws.accept()
        try:
            own(sid)
            hub = await hubs.get(sid)
        except TooManyOpen as exc:
            await ws.send_text(wire.encode(wire.error(exc.code, exc.message)))
            await ws.close(1013, exc.message[:120])  # try again later
            return
        except (Refused, SessionNotFound, RunError) as exc:
            await ws.send_text(wire.encode(wire.error("no_session", getattr(exc, "message", str(exc)))))
            await ws.close(4404)
            return
        client = hub.attach()  # no await since the hub was got: the keeper cannot close it between
        # attached before the snapshot, with no await between: nothing falls in a gap
        refresh_minds(hub.session)  # loops run in workers (SOUL_RUNNER=dbos): their mood and cycle now
        hello = {"type": "Hello", **views.session_view(soul.store, hub.session.info, hub.session)}
        await ws.send_text(wire.encode(hello))
        pump = asyncio.create_task(send_queued(ws, client))
        try:
            while True:
                await _on_socket_message(ws, hubs, hub, await frames.next_request(ws))
        except WebSocketDisconnect:
            pass
        except frames.Refused as refused:
            await frames.close_refused(ws, refused)
        finally:
            hub.detach(client)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from soul.serve.relay import start_relay

        relay = start_relay(soul, hubs)  # PostgreSQL: other processes' commits reach the tabs here
        yield
        if relay is not None:
            relay.stop()
        await hubs.close()
        if dialogues is not None:
            await dialogues.close()

    routes = [
        Route("/", index),
        Route("/api/soul", handled(soul_info)),
        Route("/api/sessions", handled(sessions), methods=["GET", "POST"]),
        Route("/api/sessions/{id}", handled(one_session), methods=["GET", "DELETE"]),
        Route("/api/sessions/{id}/messages", handled(messages), methods=["POST"]),
        Route("/api/sessions/{id}/pause", handled(steer), methods=["POST"]),
        Route("/api/sessions/{id}/resume", handled(steer), methods=["POST"]),
        Route("/api/sessions/{id}/turns/{turn:int}/trace", handled(trace)),
        Route("/api/sessions/{id}/chetana", handled(chetana)),
        Route("/api/sessions/{id}/recall", handled(recall), methods=["POST"]),
        WebSocketRoute("/api/sessions/{id}/events", events),
        *dialogue_api.routes(dialogues, soul.name, handled, _body, _json),
        *inspect_api.routes(soul, own, handled, _body, _json),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.hubs = hubs
    app.state.dialogues = dialogues
    app.state.keeper = keeper
    return GuardMiddleware(app, guard)  # type: ignore[return-value]  # its `lockout` is reachable


def _settled(task: asyncio.Task[Any]) -> None:
    """A socket's turn ended: a TurnError was already sent to every client as TurnFailed."""
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


def loops_elsewhere(session: Any) -> str | None:
    """Why pause/resume cannot steer this session's loops from here (None: they can): with
    SOUL_RUNNER=dbos `soul worker` processes run them, and this server holds none."""
    if not session.loops_in_workers:
        return None
    return ("this session's background loops run in `soul worker` processes (SOUL_RUNNER=dbos), "
            "not in this server: pause and resume steer only loops run here; stop or start the "
            "workers to hold or continue them")


async def _on_socket_message(ws: WebSocket, hubs: Hubs, hub: Any, request: tuple[str | None, dict[str, Any]]) -> None:
    """A client's request on the socket: {"type": "message", "text"}, "pause", "resume"."""
    kind, data = request
    if kind == "message":
        try:
            text = message_text(data)
        except Refused as exc:
            await ws.send_text(wire.encode(wire.error(exc.code, exc.message)))
            return

        hub.start_turn(text).add_done_callback(_settled)  # its clients see it through the events
    elif kind in ("pause", "resume"):
        if (elsewhere := loops_elsewhere(hub.session)) is not None:
            await ws.send_text(wire.encode(wire.error("loops_in_workers", elsewhere)))
            return
        hubs.steer(hub, pause=kind == "pause")
    else:
        await ws.send_text(wire.encode(wire.error("bad_request", 'send {"type": "message", "text": "..."}, {"type": "pause"} or {"type": "resume"}')))
