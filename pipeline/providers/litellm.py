"""`litellm/ANY` — the long tail of providers through `litellm` (`litellm/openai/gpt-4o-mini`,
`litellm/ollama/llama3`, `litellm/bedrock/...`).

litellm is imported on first use, after `LITELLM_LOCAL_MODEL_COST_MAP=True` so it reads its
bundled price list instead of fetching one (offline first). Its own retries are off; the
policy decides. Keys: `api_key_env` if the slot names one, else litellm's own per-provider
variables; `litellm/openai/MODEL` with a `base_url` and no key sends a placeholder, as
`openai/` does (OpenAI-compatible servers need none). A `base_url` the user has not allowed
gets the placeholder whatever is set, so litellm reads no key of its own for it
(`soul.providers.secrets.find_key`; the key rules are those of the routed provider). Costs come from litellm's price list where it knows the model.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from types import ModuleType
from typing import Any

from soul.credentials import key_family
from soul.errors import AuthError
from soul.providers.base import Chunk, Completion, Provider, Request, Usage, estimate_tokens
from soul.providers.openai import KEY_ENV as OPENAI_KEY_ENV
from soul.providers.sdk import (
    cached_tokens,
    load_sdk,
    openai_chunks,
    openai_messages,
    openai_tool_calls,
    openai_tools,
    sampling,
    translate,
)
from soul.providers.secrets import NO_KEY, find_key, redact


def _litellm() -> ModuleType:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    module = load_sdk("litellm", "litellm")
    module.suppress_debug_info = True  # it otherwise prints help banners to stdout on errors
    if hasattr(module, "telemetry"):
        module.telemetry = False
    return module


class LiteLLMProvider(Provider):
    """Any model litellm can reach, by its litellm name."""

    name = "litellm"
    can_stream = True
    can_call_tools = True  # in the OpenAI shape, which litellm translates for each provider

    def __init__(self, model: str, options: Mapping[str, Any]) -> None:
        self.sdk = _litellm()
        self.openai = load_sdk("openai", "litellm")  # litellm's exceptions subclass openai's
        self.model = model
        self.key, self.key_source = find_key(options, options.get("api_key_env"), family=key_family(f"litellm/{model}"))
        self.base_url = options.get("base_url")
        if self.key is None and self.base_url and model.startswith("openai/") and not os.environ.get(OPENAI_KEY_ENV):
            # an OpenAI-compatible server at base_url (llama.cpp, vLLM, LM Studio) wants no key,
            # but litellm's openai route refuses to call without one
            self.key = NO_KEY
        self.timeout = options.get("timeout") or 60.0
        self.where = f"litellm/{model}"

    def _arguments(self, request: Request) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request.messages),
            "timeout": self.timeout,
            "num_retries": 0,
            **sampling(request.options),
        }
        if request.tools:
            arguments["tools"] = openai_tools(request.tools)
            # litellm otherwise loads its MCP proxy for any `tools` (it needs the `mcp`
            # package); soul's tools are plain functions, never MCP servers
            arguments["_skip_mcp_handler"] = True
        if self.base_url:
            arguments["api_base"] = self.base_url
        if self.key:
            arguments["api_key"] = self.key
        return arguments

    def _cost(self, input_tokens: int, output_tokens: int) -> float | None:
        try:
            prompt, completion = self.sdk.cost_per_token(
                model=self.model, prompt_tokens=input_tokens, completion_tokens=output_tokens
            )
        except Exception:  # litellm raises for models missing from its price list
            return None
        return float(prompt + completion)

    def _usage(self, request: Request, text: str, started: float, first: float | None, reported: Any) -> Usage:
        cached = 0
        if reported is not None and getattr(reported, "prompt_tokens", None) is not None:
            input_tokens, output_tokens = reported.prompt_tokens or 0, reported.completion_tokens or 0
            cached = cached_tokens(reported, input_tokens)
        else:
            input_tokens = estimate_tokens([m.content for m in request.messages])
            output_tokens = estimate_tokens([text])
        # litellm's price list knows no cache rates for every model: the whole prompt is priced as input
        return Usage(
            input_tokens - cached, output_tokens, time.perf_counter() - started, first,
            self._cost(input_tokens, output_tokens), cached,
        )

    def _translate(self, exc: Exception) -> Exception:
        hint = self.key_source or "the provider's key variable (litellm's naming)"
        if "Missing credentials" in str(exc):
            # raised before any request, but litellm files it as a 500: not worth a retry
            return AuthError(redact(f"{self.where}: no key was found — set {hint}, or name the variable with api_key_env"))
        return translate(exc, self.openai, self.where, hint)

    async def complete(self, request: Request) -> Completion:
        started = time.perf_counter()
        try:
            response = await self.sdk.acompletion(**self._arguments(request))
        except Exception as exc:
            raise self._translate(exc) from exc
        message = response.choices[0].message if response.choices else None
        text = (message.content or "") if message is not None else ""
        return Completion(text, self._usage(request, text, started, None, getattr(response, "usage", None)), openai_tool_calls(message))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        def open_stream() -> Awaitable[Any]:
            return self.sdk.acompletion(**self._arguments(request), stream=True, stream_options={"include_usage": True})

        def usage(text: str, started: float, first: float | None, reported: Any) -> Usage:
            return self._usage(request, text, started, first, reported)

        async for chunk in openai_chunks(open_stream, where=self.where, translate=self._translate, usage=usage):
            yield chunk
