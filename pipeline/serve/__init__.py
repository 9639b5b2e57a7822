"""`soul serve`: a soul over HTTP and WebSocket, with a live web page (the `serve` extra).

The page (static HTML, CSS and plain JavaScript shipped as package data) shows the chat with
the reply streamed, the internal dialogue, the subconscious, Chetana, the memories recalled,
the trace and the sessions; the HTTP API beside it creates, lists, reads and deletes
sessions and runs turns (the turn's JSON is `soul run --json`'s); a WebSocket per session
carries every event of `Session.stream` and `Session.subscribe` as JSON with a `type`. A
soul with a `dialogue:` block also serves its dialogues (`dialogues`, `dialogue_api`): runs of
N turns or one, pause, and the runner's events on a WebSocket per dialogue.

The server is transport only: `app` routes requests to the Python API, `hub` fans a
session's events out to every tab watching it, `wire` encodes events, `views` the JSON of a
soul and its sessions, `guard` keeps it local and token-checked, `frames` reads what a socket
sends, `transport` bounds connections and times out slow headers. docs/serve.md is the manual.
"""

from soul.serve.app import create_app, message_text
from soul.serve.guard import (
    MAX_BODY_BYTES,
    MAX_MESSAGE_CHARS,
    MAX_SOCKET_BYTES,
    TOKEN_ENV,
    Guard,
    ServeError,
    check_bind,
    is_loopback,
)
from soul.serve.hub import Hubs, SessionHub, TurnError
from soul.serve.transport import uvicorn_config
from soul.serve.wire import encode, event_data

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_MESSAGE_CHARS",
    "MAX_SOCKET_BYTES",
    "TOKEN_ENV",
    "Guard",
    "Hubs",
    "ServeError",
    "SessionHub",
    "TurnError",
    "check_bind",
    "create_app",
    "encode",
    "event_data",
    "is_loopback",
    "message_text",
    "uvicorn_config",
]
