"""`openai/MODEL` — chat completions through the official `openai` SDK.

With `base_url` any OpenAI-compatible server works (llama.cpp server, Ollama, LM Studio, vLLM);
such servers usually need no key, so with a `base_url` and no key a placeholder is sent.
Streams ask for usage in the last chunk (`stream_options.include_usage`); servers that do not
send it get an estimate.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from soul.errors import AuthError, ProviderUnavailable
from soul.providers.base import Chunk, Completion, Provider, Request, Usage, estimate_tokens
from soul.providers.sdk import LoopClients, cost, load_sdk, sampling, translate
from soul.providers.secrets import find_key

KEY_ENV = "OPENAI_API_KEY"
NO_KEY = "sk-no-key-needed"  # local OpenAI-compatible servers ignore the key but the SDK wants one


class OpenAIProvider(Provider):
    """Chat completions from OpenAI or any server that speaks its API."""

    name = "openai"
    can_stream = True

    def __init__(self, model: str, options: Mapping[str, Any]) -> None:
        self.sdk = load_sdk("openai", "openai")
        self.model = model
        base_url, timeout = options.get("base_url"), options.get("timeout")
        key, self.key_source = find_key(options, KEY_ENV)
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
        return {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            **sampling(request.options, self.clients.get().chat.completions.create),
        }

    def _usage(self, request: Request, text: str, started: float, first: float | None, reported: Any) -> Usage:
        if reported is not None:
            input_tokens, output_tokens = reported.prompt_tokens or 0, reported.completion_tokens or 0
        else:
            input_tokens = estimate_tokens([m.content for m in request.messages])
            output_tokens = estimate_tokens([text])
        return Usage(
            input_tokens, output_tokens, time.perf_counter() - started, first,
            cost(self.model, input_tokens, output_tokens),
        )

    async def complete(self, request: Request) -> Completion:
        started = time.perf_counter()
        try:
            response = await self.clients.get().chat.completions.create(**self._arguments(request))
        except Exception as exc:
            raise translate(exc, self.sdk, self.where, self.key_source) from exc
        text = (response.choices[0].message.content or "") if response.choices else ""
        return Completion(text, self._usage(request, text, started, None, response.usage))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        started = time.perf_counter()
        first: float | None = None
        pieces: list[str] = []
        reported = None
        finished = False
        try:
            chunks = await self.clients.get().chat.completions.create(
                **self._arguments(request), stream=True, stream_options={"include_usage": True}
            )
            async with chunks:
                async for chunk in chunks:
                    if chunk.usage is not None:
                        reported = chunk.usage
                    for choice in chunk.choices:
                        finished = finished or choice.finish_reason is not None
                        text = choice.delta.content if choice.delta else None
                        if text:
                            first = first if first is not None else time.perf_counter() - started
                            pieces.append(text)
                            yield Chunk(text)
        except Exception as exc:
            raise translate(exc, self.sdk, self.where, self.key_source) from exc
        if not finished:  # the connection closed cleanly but no choice ever finished
            raise ProviderUnavailable(f"{self.where}: the stream ended before a finish_reason")
        yield Chunk("", self._usage(request, "".join(pieces), started, first, reported))
