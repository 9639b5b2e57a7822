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

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from soul.store import redact, redact_data, secrets


def event_data(event: Any) -> dict[str, Any]:
    """A runtime event (a dataclass) as a JSON-safe dict with `type` first."""
    if isinstance(event, dict):
        return event
    return {"type": type(event).__name__, **dataclasses.asdict(event)}


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
    """`encode(event_data(event))` in one walk: a server sends one of these per streamed
    token, so the event is not copied (`dataclasses.asdict` deep-copies every field) and then
    walked again to redact it; the text is the same."""
    known = secrets()
    if isinstance(event, dict):
        data = _plain(event, known)
    else:
        data = {"type": type(event).__name__,
                **{f.name: _plain(getattr(event, f.name), known) for f in dataclasses.fields(event)}}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def _plain(value: Any, known: list[str]) -> Any:
    """`value` as JSON-ready data, every string redacted: dataclasses become dicts (as
    `dataclasses.asdict` makes them), tuples lists; other values stay as they are."""
    if isinstance(value, str):
        return redact(value, known)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {(redact(k, known) if isinstance(k, str) else k): _plain(v, known) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, known) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), known) for f in dataclasses.fields(value)}
    return value


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
