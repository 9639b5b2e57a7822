"""`openai/MODEL` — chat completions through the official `openai` SDK.

With `base_url` any OpenAI-compatible server works (llama.cpp server, Ollama, LM Studio, vLLM);
such servers usually need no key, so with a `base_url` and no key a placeholder is sent. The key
goes to a `base_url` only if the user allowed its host (`soul.providers.secrets.find_key`).
Streams ask for usage in the last chunk (`stream_options.include_usage`); servers that do not
send it get an estimate.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

from soul.errors import AuthError
from soul.providers.base import Chunk, Completion, Provider, Request, Usage, estimate_tokens
from soul.providers.sdk import (
    LoopClients,
    cached_tokens,
    cost,
    load_sdk,
    openai_chunks,
    openai_messages,
    openai_tool_calls,
    openai_tools,
    sampling,
    translate,
)
from soul.providers.secrets import NO_KEY, find_key

KEY_ENV = "OPENAI_API_KEY"


class OpenAIProvider(Provider):
    """Chat completions from OpenAI or any server that speaks its API."""

    name = "openai"
    can_stream = True
    can_call_tools = True  # `tools` in, `message.tool_calls` out (servers without them ignore or refuse tools)

    def __init__(self, model: str, options: Mapping[str, Any]) -> None:
        self.sdk = load_sdk("openai", "openai")
        self.model = model
        base_url, timeout = options.get("base_url"), options.get("timeout")
        key, self.key_source = find_key(options, KEY_ENV, family="openai")
        if key is None:
            if not base_url:
                raise AuthError(
                    f"openai/{model}: no key found — set {self.key_source}, give the slot a base_url "
                    "(an OpenAI-compatible server), or use --model local (or --script FILE for canned replies)"
                )
            key = NO_KEY
        self.clients = LoopClients(
            lambda: self.sdk.AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout or 60.0)
        )
        self.where = f"openai/{model}"

    def _arguments(self, request: Request) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request.messages),
            **sampling(request.options, self.clients.get().chat.completions.create),
        }
        if request.tools:
            arguments["tools"] = openai_tools(request.tools)
        return arguments

    def _usage(self, request: Request, text: str, started: float, first: float | None, reported: Any) -> Usage:
        cached = 0
        if reported is not None:
            input_tokens, output_tokens = reported.prompt_tokens or 0, reported.completion_tokens or 0
            cached = cached_tokens(reported, input_tokens)
            input_tokens -= cached  # the cached part of the prompt is billed at its own rate
        else:
            input_tokens = estimate_tokens([m.content for m in request.messages])
            output_tokens = estimate_tokens([text])
        return Usage(
            input_tokens, output_tokens, time.perf_counter() - started, first,
            cost("openai", self.model, input_tokens, output_tokens, cached), cached,
        )

    async def complete(self, request: Request) -> Completion:
        started = time.perf_counter()
        try:
            response = await self.clients.get().chat.completions.create(**self._arguments(request))
        except Exception as exc:
            raise translate(exc, self.sdk, self.where, self.key_source) from exc
        message = response.choices[0].message if response.choices else None
        text = (message.content or "") if message is not None else ""
        return Completion(text, self._usage(request, text, started, None, response.usage), openai_tool_calls(message))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        def open_stream() -> Awaitable[Any]:
            return self.clients.get().chat.completions.create(
                **self._arguments(request), stream=True, stream_options={"include_usage": True}
            )

        def usage(text: str, started: float, first: float | None, reported: Any) -> Usage:
            return self._usage(request, text, started, first, reported)

        async for chunk in openai_chunks(
            open_stream,
            where=self.where,
            translate=lambda exc: translate(exc, self.sdk, self.where, self.key_source),
            usage=usage,
        ):
            yield chunk
