"""Events on the wire: every runtime event as one JSON object with a `type` field.

The event's own fields are kept as they are (`dataclasses.asdict`); `type` is the event's
class name (`Token`, `StepFinished`, `MoodChanged`, ...). The server adds a few events of
its own, built here too so their shape is in one place: `UserMessage` (what a tab sent, so the
other tabs show it), `TurnDone` (the turn's JSON and its timings), `TurnFailed`, `Hello` (what
a new connection starts from) and `Error` (a refused request on the socket).

Everything that leaves the server is redacted (the environment's secrets replaced), as the
store and `soul run --json` do; the page sets every text with `textContent`.
"""

from __future__ import annotations

import json
from typing import Any

from soul.runtime import as_data
from soul.store import redact_data


def event_data(event: Any) -> dict[str, Any]:
    """A runtime event (a dataclass) as a JSON-safe dict with `type` first (`asdict`'s
    conversion without its deep copy: a server makes one per streamed token)."""
    if isinstance(event, dict):
        return event
    return {"type": type(event).__name__, **as_data(event)}


def request(raw: str) -> tuple[str | None, dict[str, Any]]:
    """A client's socket message: its `type` (None when it is not a JSON object with one) and
    the object itself."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None, {}
    if not isinstance(data, dict):
        return None, {}
    kind = data.get("type")
    return (kind if isinstance(kind, str) else None), data


def encode(data: dict[str, Any]) -> str:
    """The JSON text sent to clients: redacted, compact, never failing on an odd value."""
    return json.dumps(redact_data(data), ensure_ascii=False, separators=(",", ":"), default=str)


def encode_event(event: Any) -> str:
    """An event as the JSON text its clients get (once for all of them): `encode(event_data(event))`."""
    return encode(event_data(event))


def user_message(text: str) -> dict[str, Any]:
    return {"type": "UserMessage", "text": text}


def turn_done(turn: dict[str, Any], server_ms: float, provider_ms: float, loop_ms: float) -> dict[str, Any]:
    """The end of a user turn: its JSON (as `POST .../messages` returns it) and timings:
    `server_ms` from the hub starting the turn to its commit, its events and its JSON
    (encoding this event aside), `provider_ms` the wall time of its model calls (so
    `server_ms - provider_ms` is the framework's and server's, minus their handling of the
    streamed tokens, which runs inside the calls), and `loop_ms` the time the event loop spent
    running the turn's own code, tokens included (`serve/clock.py`)."""
    return {"type": "TurnDone", "turn": turn, "server_ms": round(server_ms, 3),
            "provider_ms": round(provider_ms, 3), "loop_ms": round(loop_ms, 3)}


def turn_failed(error: str, code: str = "turn_failed") -> dict[str, Any]:
    return {"type": "TurnFailed", "code": code, "error": error}


def error(code: str, message: str) -> dict[str, Any]:
    return {"type": "Error", "code": code, "error": message}
