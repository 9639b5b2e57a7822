"""What a client sends on a WebSocket: text frames, each one JSON request. Anything else ends
the connection with a close frame that says why, never with a server error.

- a binary frame: closed with 1003 (unsupported data): "send JSON text frames";
- a frame nested deeper than Python's JSON reader goes (a hostile `[[[[…`): closed with 1007
  (invalid payload);
- a frame that is not a JSON object with a `type`: answered with an `Error` event by the
  socket's handler, which gets `(None, {})`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from soul.serve import wire

BINARY = (1003, "this socket takes JSON text frames, not binary ones")
TOO_DEEP = (1007, "the frame's JSON nests too deeply")


class Refused(Exception):
    """A frame the socket will not read: the close code and reason to send."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


async def next_request(ws: WebSocket) -> tuple[str | None, dict[str, Any]]:
    """The next request on `ws` as (type, object) (`wire.request`); WebSocketDisconnect when the
    client left, `Refused` for a frame that ends the connection."""
    message = await ws.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000), message.get("reason"))
    text = message.get("text")
    if text is None:
        raise Refused(*BINARY)
    try:
        return wire.request(text)
    except RecursionError:
        raise Refused(*TOO_DEEP) from None


async def close_refused(ws: WebSocket, refused: Refused) -> None:
    """Close `ws` with the refusal's code and reason (the client may be gone already)."""
    with contextlib.suppress(RuntimeError):  # already closed
        await ws.close(refused.code, refused.reason)
