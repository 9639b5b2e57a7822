"""`anthropic/MODEL` — the Messages API through the official `anthropic` SDK.

The system prompt goes in `system`, not among the messages — cut into text blocks with
`cache_control` breakpoints where the prompt builder marked its stable prefixes (the persona,
the summary), so Anthropic bills the repeated prefix as a cache read; replies stream as SSE events;
usage comes from the API (input tokens at `message_start`, output tokens at `message_delta`).
The SDK's own retries are off: the policy in `policy.py` decides (see `resolve`).

Tools are native: `Request.tools` go as `tools` (`input_schema`), `tool_use` blocks come back as
`Completion.tool_calls`; an assistant message's calls go back as `tool_use` blocks and the
results as `tool_result` blocks of one user message (a user note right after joins it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from soul.errors import AuthError, ProviderUnavailable
from soul.providers.arguments import arguments_json
from soul.providers.base import Chunk, Completion, Message, Provider, Request, ToolCall, Usage
from soul.providers.sdk import LoopClients, cost, load_sdk, sampling, translate
from soul.providers.secrets import NO_KEY, find_key

DEFAULT_MAX_TOKENS = 1024  # the Messages API requires max_tokens; a turn's sections fit
KEY_ENV = "ANTHROPIC_API_KEY"


class AnthropicProvider(Provider):
    """Claude models over the Messages API."""

    name = "anthropic"
    can_stream = True
    can_call_tools = True

    def __init__(self, model: str, options: Mapping[str, Any]) -> None:
        self.sdk = load_sdk("anthropic", "anthropic")
        self.model = model
        key, self.key_source = find_key(options, KEY_ENV, family="anthropic")
        if key is None:
            raise AuthError(f"anthropic/{model}: no key found — set {self.key_source} or use --model local (or --script FILE for canned replies)")
        base_url, timeout = options.get("base_url"), options.get("timeout")
        # a host that may not have the key gets no header the user set for Anthropic either
        headers = {name: self.sdk.omit for name in _custom_header_names()} if key == NO_KEY else None
        self.clients = LoopClients(
            lambda: self.sdk.AsyncAnthropic(api_key=key, base_url=base_url, max_retries=0, timeout=timeout or 60.0,
                                            default_headers=headers)
        )
        self.where = f"anthropic/{model}"

    def _arguments(self, request: Request) -> dict[str, Any]:
        system = system_blocks(request.messages)
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": anthropic_messages(request.messages),
            "max_tokens": DEFAULT_MAX_TOKENS,
            **sampling(request.options, self.clients.get().messages.create),
        }
        if system:
            arguments["system"] = system
        if request.tools:
            arguments["tools"] = [{"name": s.name, "description": s.description, "input_schema": s.parameters}
                                  for s in request.tools]
        return arguments

    def _usage(self, started: float, first: float | None, input_tokens: int, output_tokens: int,
               read: int = 0, written: int = 0) -> Usage:
        return Usage(
            input_tokens, output_tokens, time.perf_counter() - started, first,
            cost("anthropic", self.model, input_tokens, output_tokens, read, written), read, written,
        )

    async def complete(self, request: Request) -> Completion:
        started = time.perf_counter()
        try:
            message = await self.clients.get().messages.create(**self._arguments(request))
        except Exception as exc:
            raise translate(exc, self.sdk, self.where, self.key_source) from exc
        text = "".join(block.text for block in message.content if block.type == "text")
        calls = tuple(ToolCall(block.id, block.name, arguments_json(block.input))
                      for block in message.content if block.type == "tool_use")
        read, written = cache_usage(message.usage)
        usage = self._usage(started, None, message.usage.input_tokens, message.usage.output_tokens, read, written)
        return Completion(text, usage, calls)

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        started = time.perf_counter()
        first: float | None = None
        input_tokens = output_tokens = read = written = 0
        finished = False
        try:
            events = await self.clients.get().messages.create(**self._arguments(request), stream=True)
            async with events:
                async for event in events:
                    if event.type == "message_start":
                        input_tokens = event.message.usage.input_tokens
                        output_tokens = event.message.usage.output_tokens or 0
                        read, written = cache_usage(event.message.usage)
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                        first = first if first is not None else time.perf_counter() - started
                        yield Chunk(event.delta.text)
                    elif event.type == "message_delta" and event.usage is not None:
                        output_tokens = event.usage.output_tokens
                    elif event.type == "message_stop":
                        finished = True
        except Exception as exc:
            raise translate(exc, self.sdk, self.where, self.key_source) from exc
        if not finished:  # the connection closed cleanly but the message never ended
            raise ProviderUnavailable(f"{self.where}: the stream ended before message_stop")
        yield Chunk("", self._usage(started, first, input_tokens, output_tokens, read, written))


MAX_BREAKPOINTS = 4  # the Messages API takes at most four cache_control marks per request
CACHE_CONTROL = {"type": "ephemeral"}  # the 5-minute cache


def system_blocks(messages: Sequence[Message]) -> str | list[dict[str, Any]]:
    """The system prompt: the text as is, or — when the prompt builder marked where its stable
    prefixes end (`Message.cache_points`) — text blocks cut there, each ending at a mark
    carrying `cache_control`. The blocks' texts put together are the text: the model reads
    the same prompt; the API caches the prefix up to each mark (tools, then system)."""
    system = [m for m in messages if m.role == "system"]
    text = "\n\n".join(m.content for m in system)
    points: list[int] = []
    offset = 0
    for m in system:
        points += [offset + p for p in m.cache_points if 0 < p <= len(m.content)]
        offset += len(m.content) + 2
    points = sorted(set(points))[-MAX_BREAKPOINTS:]
    if not text or not points:
        return text
    blocks: list[dict[str, Any]] = []
    start = 0
    for point in points:
        blocks.append({"type": "text", "text": text[start:point], "cache_control": dict(CACHE_CONTROL)})
        start = point
    if start < len(text):
        blocks.append({"type": "text", "text": text[start:]})
    return blocks


def cache_usage(usage: Any) -> tuple[int, int]:
    """(cache reads, cache writes) of a Messages API usage object; 0 where not reported."""
    return (int(getattr(usage, "cache_read_input_tokens", 0) or 0),
            int(getattr(usage, "cache_creation_input_tokens", 0) or 0))


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The non-system messages in the Messages API shape: tool calls as `tool_use` blocks,
    results as `tool_result` blocks, consecutive user-side messages joined into one."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)} for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks})
            continue
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}
            if m.is_error:
                block["is_error"] = True
        elif m.role == "user" and out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
            block = {"type": "text", "text": m.content}  # a note after tool results joins them
        else:
            out.append({"role": m.role, "content": m.content})
            continue
        if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    return out


def _custom_header_names() -> list[str]:
    """The headers `ANTHROPIC_CUSTOM_HEADERS` adds to every request ("Name: value" lines)."""
    text = os.environ.get("ANTHROPIC_CUSTOM_HEADERS") or ""
    return [line.split(":", 1)[0].strip() for line in text.split("\n") if ":" in line and line.split(":", 1)[0].strip()]


def _input(arguments: str) -> Any:
    """A tool call's arguments as the `input` object the API wants back ({} if not JSON)."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
