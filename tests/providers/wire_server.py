"""A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages API and the OpenAI chat
completions API (JSON and SSE streaming), with faults injected on demand.

Each request takes the next queued `Fault` (none: a normal answer) and the next queued reply
(none: `default_reply`). Requests are recorded with their headers and JSON bodies. The server
stops at fixture teardown, or by itself after `lifetime` seconds.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PIECE = 5  # characters per streamed delta


@dataclass(frozen=True)
class Fault:
    """What goes wrong with one request."""

    status: int | None = None  # answer with this HTTP error
    retry_after: str | None = None  # with this retry-after header (seconds)
    delay: float = 0.0  # wait this long before answering
    cut_after: int | None = None  # stream: drop the connection after this many text deltas
    clean_end_after: int | None = None  # stream: end the body politely, but without the final event


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class WireServer:
    """The fake API server; use `anthropic_url` / `openai_url` as base_url."""

    def __init__(self, lifetime: float = 120.0) -> None:
        self.faults: list[Fault] = []
        self.replies: list[str] = []
        self.default_reply = "Hello from the wire."
        self.requests: list[Received] = []
        # Anthropic's prompt cache, as the API keeps it: the prefixes (tools, then system
        # blocks) up to each `cache_control` mark it has seen
        self.prompt_cache: set[str] = set()
        self.openai_cached = 0  # OpenAI: the prompt_tokens_details.cached_tokens to report
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(lifetime, self.stop)
        self.timer.daemon = True
        self.stopped = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def anthropic_url(self) -> str:
        return self.url

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> WireServer:
        self.thread.start()
        self.timer.start()
        return self

    def stop(self) -> None:
        with self.lock:
            if self.stopped:
                return
            self.stopped = True
        self.timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    def take(self) -> tuple[Fault | None, str]:
        with self.lock:
            fault = self.faults.pop(0) if self.faults else None
            reply = self.replies[0] if self.replies else self.default_reply
            if fault is None and self.replies:
                self.replies.pop(0)  # a failed request does not use up the reply
        return fault, reply


def _handler(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            with server.lock:
                server.requests.append(Received(self.path, headers, body))
            flavour = "anthropic" if self.path.endswith("/messages") else "openai"
            fault, reply = server.take()
            try:
                if fault and fault.delay:
                    time.sleep(fault.delay)
                if fault and fault.status:
                    self.error(flavour, fault, headers)
                elif body.get("stream"):
                    self.stream(flavour, body, reply, fault)
                else:
                    self.json(200, _anthropic_message(body, reply, server) if flavour == "anthropic" else _openai_completion(body, reply, server))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def json(self, status: int, data: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def error(self, flavour: str, fault: Fault, headers: dict[str, str]) -> None:
            assert fault.status is not None
            key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
            # Real servers sometimes echo what they were sent; the 401 does, to test redaction.
            message = f"invalid api key: {key}" if fault.status == 401 else f"fault {fault.status}"
            kind = {401: "authentication_error", 400: "invalid_request_error", 429: "rate_limit_error"}.get(fault.status, "api_error")
            data = (
                {"type": "error", "error": {"type": kind, "message": message}}
                if flavour == "anthropic"
                else {"error": {"message": message, "type": kind, "code": None}}
            )
            extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            self.json(fault.status, data, extra)

        def stream(self, flavour: str, body: dict[str, Any], reply: str, fault: Fault | None) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            pieces = [reply[i : i + PIECE] for i in range(0, len(reply), PIECE)]
            events = _anthropic_events(body, pieces, server) if flavour == "anthropic" else _openai_events(body, pieces, server)
            deltas = 0
            for is_delta, data in events:
                if fault and is_delta and deltas == fault.cut_after:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # mid-body: no final chunk
                    self.close_connection = True
                    return
                if fault and is_delta and deltas == fault.clean_end_after:
                    break
                self.chunk(data)
                deltas += is_delta
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return "".join(b.get("text", "") for b in system) if isinstance(system, list) else str(system)


def _tokens(body: dict[str, Any]) -> int:
    text = _system_text(body) + "".join(str(m.get("content", "")) for m in body.get("messages", []))
    return max(1, len(text) // 4)


def _anthropic_usage(body: dict[str, Any], server: WireServer | None) -> dict[str, int]:
    """Input tokens as the Messages API counts them with its prompt cache: the longest marked
    prefix seen before is read, the part up to the last mark written, the rest input."""
    total = _tokens(body)
    system = body.get("system")
    if server is None or not isinstance(system, list):
        return {"input_tokens": total}
    prefix = json.dumps(body.get("tools", []))
    marks: list[str] = []
    for block in system:
        prefix += block.get("text", "")
        if block.get("cache_control"):
            marks.append(prefix)
    read = max((len(m) for m in marks if m in server.prompt_cache), default=0)
    last = len(marks[-1]) if marks else 0
    with server.lock:
        server.prompt_cache.update(marks)
    read_tokens, written_tokens = read // 4, max(0, last - read) // 4
    return {"input_tokens": max(1, total - read_tokens - written_tokens),
            "cache_read_input_tokens": read_tokens, "cache_creation_input_tokens": written_tokens}


def _anthropic_message(body: dict[str, Any], reply: str, server: WireServer | None = None) -> dict[str, Any]:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
        "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {**_anthropic_usage(body, server), "output_tokens": max(1, len(reply) // 4)},
    }


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return ((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode()


def _anthropic_events(body: dict[str, Any], pieces: list[str], server: WireServer | None = None) -> list[tuple[bool, bytes]]:
    start = _anthropic_message(body, "", server)
    start["content"], start["stop_reason"] = [], None
    start["usage"] = {**start["usage"], "output_tokens": 1}
    events = [
        (False, _sse("message_start", {"type": "message_start", "message": start})),
        (False, _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
        (False, _sse("ping", {"type": "ping"})),
    ]
    for piece in pieces:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        events.append((True, _sse("content_block_delta", delta)))
    output = max(1, len("".join(pieces)) // 4)
    events += [
        (False, _sse("content_block_stop", {"type": "content_block_stop", "index": 0})),
        (False, _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": output}})),
        (False, _sse("message_stop", {"type": "message_stop"})),
    ]
    return events


def _openai_usage(prompt: int, completion: int, server: WireServer | None) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if server is not None and server.openai_cached:
        usage["prompt_tokens_details"] = {"cached_tokens": min(server.openai_cached, prompt), "audio_tokens": 0}
    return usage


def _openai_completion(body: dict[str, Any], reply: str, server: WireServer | None = None) -> dict[str, Any]:
    prompt, completion = _tokens(body), max(1, len(reply) // 4)
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        "usage": _openai_usage(prompt, completion, server),
    }


def _openai_events(body: dict[str, Any], pieces: list[str], server: WireServer | None = None) -> list[tuple[bool, bytes]]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"), "choices": choices, **extra}

    events = [(False, _sse(None, chunk({"role": "assistant", "content": ""})))]
    events += [(True, _sse(None, chunk({"content": piece}))) for piece in pieces]
    events.append((False, _sse(None, chunk({}, "stop"))))
    if (body.get("stream_options") or {}).get("include_usage"):
        prompt, completion = _tokens(body), max(1, len("".join(pieces)) // 4)
        usage = _openai_usage(prompt, completion, server)
        events.append((False, _sse(None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"), "choices": [], "usage": usage})))
    events.append((False, _sse(None, "[DONE]")))
    return events
