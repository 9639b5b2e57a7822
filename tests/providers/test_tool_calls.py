"""Native tool calling through the real SDKs, over HTTP, against recorded wire-format replies.

The server below is a real HTTP server on 127.0.0.1 that answers with bodies in the APIs' own
shapes (a tool call first, then text) and keeps what it was sent, so the test checks both
directions of the shaping — specs and results out, calls in — with the SDK doing its real work.
The llama.cpp server fixture is not used: llama-cpp-python's server (0.3) returns tool calls
only for a forced `tool_choice` or a function-calling chat format (chatml-function-calling,
functionary), and the fixture serves SmolLM2 with its own chat template, where `tool_choice:
auto` never yields a call (llama_cpp/llama_chat_format.py, the Jinja formatter).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from soul.providers import Message, Request, ToolCall, ToolSpec, resolve

SPEC = ToolSpec("forecast", "The weather forecast for a city.",
                {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

OPENAI_CALL = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "forecast", "arguments": "{\"city\": \"Oslo\"}"}}]}}],
    "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
}
ANTHROPIC_CALL = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "stop_reason": "tool_use",
    "stop_sequence": None,
    "content": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "forecast", "input": {"city": "Oslo"}}],
    "usage": {"input_tokens": 50, "output_tokens": 10},
}


class Recorded:
    """Serves the given JSON bodies in order; keeps each request's JSON body."""

    def __init__(self, bodies: list[dict[str, Any]]) -> None:
        self.bodies = list(bodies)
        self.received: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server.received.append(json.loads(self.rfile.read(int(self.headers.get("content-length") or 0))))
                payload = json.dumps(server.bodies.pop(0)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[Recorded] = []

    def start(bodies: list[dict[str, Any]]) -> Recorded:
        servers.append(Recorded(bodies))
        return servers[-1]

    yield start
    for s in servers:
        s.httpd.shutdown()
        s.httpd.server_close()


HISTORY = (
    Message("system", "You are toolie."),
    Message("user", "weather in Oslo?"),
    Message("assistant", "", (ToolCall("call_abc", "forecast", '{"city": "Oslo"}'),)),
    Message("tool", '{"sky": "sunny"}', tool_call_id="call_abc"),
    Message("user", "You have used every tool round: write your answer now, without calling a tool."),
)


@pytest.mark.parametrize("spec", ["openai/gpt-4o-mini", "litellm/openai/gpt-4o-mini"])
def test_openai_shape_tools_out_calls_in_results_back(spec: str, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if spec.startswith("litellm"):
        pytest.importorskip("litellm")
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = serve([OPENAI_CALL])
    provider = resolve(spec, {"base_url": server.url + "/v1", "retries": 0})
    assert provider.can_call_tools
    completion = asyncio.run(provider.complete(Request(spec, HISTORY, tools=(SPEC,))))
    assert completion.tool_calls == (ToolCall("call_abc", "forecast", '{"city": "Oslo"}'),)
    body = server.received[0]
    assert body["tools"] == [{"type": "function", "function": {"name": "forecast", "description": SPEC.description, "parameters": SPEC.parameters}}]
    sent = {k: v for k, v in body["messages"][2].items() if v is not None}  # litellm drops a None content
    assert sent == {"role": "assistant", "tool_calls": [
        {"id": "call_abc", "type": "function", "function": {"name": "forecast", "arguments": '{"city": "Oslo"}'}}]}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_abc", "content": '{"sky": "sunny"}'}


def test_anthropic_shape_tools_out_calls_in_results_back(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    server = serve([ANTHROPIC_CALL])
    provider = resolve("anthropic/claude-haiku-4-5", {"base_url": server.url, "retries": 0})
    error = Message("tool", "error: ValueError: down", tool_call_id="toolu_0", is_error=True)
    completion = asyncio.run(provider.complete(Request("anthropic/claude-haiku-4-5", (*HISTORY[:4], error, HISTORY[4]), tools=(SPEC,))))
    assert completion.text == "Let me look."
    assert completion.tool_calls == (ToolCall("toolu_1", "forecast", '{"city": "Oslo"}'),)
    body = server.received[0]
    assert body["system"] == "You are toolie."
    assert body["tools"] == [{"name": "forecast", "description": SPEC.description, "input_schema": SPEC.parameters}]
    assert body["messages"][1] == {"role": "assistant", "content": [{"type": "tool_use", "id": "call_abc", "name": "forecast", "input": {"city": "Oslo"}}]}
    # both results and the note after them are one user message
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_abc", "content": '{"sky": "sunny"}'},
        {"type": "tool_result", "tool_use_id": "toolu_0", "content": "error: ValueError: down", "is_error": True},
        {"type": "text", "text": HISTORY[4].content},
    ]}
    assert len(body["messages"]) == 3
