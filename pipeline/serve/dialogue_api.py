"""The dialogue routes of `soul serve` (a soul with a `dialogue:` block; 404 for the others):

    GET    /api/dialogues                 this soul's saved dialogues, newest first
    POST   /api/dialogues                 a new dialogue {"seed": N} (optional) → its info (201)
    GET    /api/dialogues/{id}            {dialogue, result}: the info and `soul dialogue --json`'s result
    POST   /api/dialogues/{id}/step       {"turns": N (default 1), "wait": true} → the result after
                                          the run; with "wait": false, the info at once (202)
    POST   /api/dialogues/{id}/pause      stop the run after the current turn → the info
    WS     /api/dialogues/{id}/events     Hello {dialogue, events}, then every event as JSON with
                                          `type`; accepts {"type": "run", "turns": N}, {"type": "pause"}

Transport only: `serve/dialogues.py` holds the runners; this module reads requests and writes JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from soul.serve import frames, wire
from soul.serve.dialogues import DialogueHub, DialogueRefused, Dialogues
from soul.serve.hub import send_queued
from soul.serve.idle import TooManyOpen


def _turns(data: Any) -> int:
    turns = data.get("turns", 1) if isinstance(data, dict) else None
    if not isinstance(turns, int) or isinstance(turns, bool):
        raise DialogueRefused(400, "bad_turns", '`turns` is a whole number: {"turns": 4}')
    return turns


def routes(dialogues: Dialogues | None, soul_name: str, handled: Callable[[Any], Any], body: Any, as_json: Any) -> list[BaseRoute]:
    """The routes above; `handled` wraps an endpoint with the app's error answers, `body` reads a
    JSON request body, `as_json` writes a (redacted) JSON response."""

    def need() -> Dialogues:
        if dialogues is None:
            raise DialogueRefused(404, "no_dialogue", f"soul '{soul_name}' has no `dialogue:` block; serve a dialogue soul (e.g. entelgia)")
        return dialogues

    async def collection(request: Request) -> Response:
        known = need()
        if request.method == "POST":
            data = await body(request)
            seed = data.get("seed")
            if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
                raise DialogueRefused(400, "bad_seed", '`seed` is a whole number: {"seed": 7}')
            return as_json((await known.create(seed)).info(), 201)
        return as_json(await asyncio.to_thread(known.listed))  # it reads every saved dialogue's file

    async def one(request: Request) -> Response:
        hub = await need().get(request.path_params["id"])
        payload = {"dialogue": hub.info(), "result": await hub.result()}
        return await asyncio.to_thread(as_json, payload)  # redacting and encoding 10,000 turns: off the loop too

    async def step(request: Request) -> Response:
        hub = await need().get(request.path_params["id"])
        data = await body(request)
        task = hub.run(_turns(data))
        if data.get("wait", True) is False:
            return as_json(hub.info(), 202)
        return as_json(await asyncio.shield(task))  # the caller may go away; the run does not

    async def pause(request: Request) -> Response:
        hub = await need().get(request.path_params["id"])
        hub.pause()
        return as_json(hub.info())

    async def events(ws: WebSocket) -> None:
        await ws.accept()
        try:
            hub = await need().get(ws.path_params["id"])
        except (DialogueRefused, TooManyOpen) as exc:
            await ws.send_text(wire.encode(wire.error(exc.code, exc.message)))
            await ws.close(1013 if isinstance(exc, TooManyOpen) else 4404, exc.message[:120])
            return
        client = hub.attach()  # no await since the hub was got: the keeper cannot close it between
        pump: asyncio.Task[None] | None = None
        try:
            # attached first, then the events so far taken with no await between (no gap, no
            # event twice: later ones wait in the client's queue until the hello is sent)
            await ws.send_text(await hub.hello_text())
            pump = asyncio.create_task(send_queued(ws, client))
            while True:
                await _on_message(ws, hub, await frames.next_request(ws))
        except WebSocketDisconnect:
            pass
        except frames.Refused as refused:
            await frames.close_refused(ws, refused)
        finally:
            hub.detach(client)
            if pump is not None:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pump

    return [
        Route("/api/dialogues", handled(collection), methods=["GET", "POST"]),
        Route("/api/dialogues/{id}", handled(one)),
        Route("/api/dialogues/{id}/step", handled(step), methods=["POST"]),
        Route("/api/dialogues/{id}/pause", handled(pause), methods=["POST"]),
        WebSocketRoute("/api/dialogues/{id}/events", events),
    ]


async def _on_message(ws: WebSocket, hub: DialogueHub, request: tuple[str | None, dict[str, Any]]) -> None:
    """A client's request on the dialogue socket: {"type": "run", "turns": N} or {"type": "pause"}."""
    kind, data = request
    if kind == "run":
        try:
            hub.run(_turns(data))
        except DialogueRefused as exc:
            await ws.send_text(wire.encode(wire.error(exc.code, exc.message)))
    elif kind == "pause":
        hub.pause()
    else:
        await ws.send_text(wire.encode(wire.error("bad_request", 'send {"type": "run", "turns": N} or {"type": "pause"}')))
