"""What the SDK-backed providers share: loading the SDK, one client per event loop, sampling
options, the price of a call, reading an OpenAI-style chunk stream, and translating the Stainless-generated SDKs' errors (anthropic and openai
raise the same family of classes) into soul's ProviderError tree at one boundary."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from soul.errors import (
    AuthError,
    BadRequest,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from soul.providers.base import Chunk, Message, ToolCall, ToolSpec, Usage
from soul.providers.secrets import redact

SAMPLING = ("temperature", "max_tokens", "top_p")  # the slot options that reach the model

def load_sdk(module: str, extra: str) -> ModuleType:
    """Import an SDK, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderError(
            f"the {extra} provider needs the '{module}' package — pip install 'soulgraph[{extra}]'"
        ) from exc


def cost(provider: str, model: str, input_tokens: int, output_tokens: int, cache_read: int = 0,
         cache_write: int = 0) -> float | None:
    """The call's price in USD from the price table (`providers/prices.py`: input, output, cache
    read and cache write prices), None if unknown; `input_tokens` excludes the cached ones."""
    from soul.providers.prices import call_cost

    return call_cost(provider, f"{provider}/{model}", input_tokens, output_tokens,  # type: ignore[no-any-return]
                     cache_read, cache_write)["usd"]


def cached_tokens(reported: Any, prompt_tokens: int) -> int:
    """The prompt tokens an OpenAI-style usage says came from the provider's automatic prompt
    cache (`prompt_tokens_details.cached_tokens`), at most the prompt; 0 when not reported."""
    details = getattr(reported, "prompt_tokens_details", None)
    if isinstance(details, dict):
        value = details.get("cached_tokens")
    else:
        value = getattr(details, "cached_tokens", None)
    return min(int(value), prompt_tokens) if isinstance(value, int) and value > 0 else 0


def sampling(options: Mapping[str, Any], method: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The slot's sampling options as keyword arguments of `method`. Ones the SDK version no
    longer takes as arguments go in `extra_body`, so the API still receives them (and says so
    with a 400 if the model refuses them)."""
    chosen = {k: options[k] for k in SAMPLING if options.get(k) is not None}
    if method is None or not chosen:
        return chosen
    accepted = _parameters(method)
    extra = {k: chosen.pop(k) for k in list(chosen) if k not in accepted}
    return {**chosen, "extra_body": extra} if extra else chosen


_signatures: dict[Any, frozenset[str]] = {}


def _parameters(method: Callable[..., Any]) -> frozenset[str]:
    func = getattr(method, "__func__", method)
    names = _signatures.get(func)
    if names is None:
        names = _signatures[func] = frozenset(inspect.signature(func).parameters)
    return names


def _is_http(exc: BaseException, *names: str) -> bool:
    """An httpx (or httpx2, which newer SDKs use) exception of one of these classes: the SDKs
    let transport errors raised while a stream is read pass through unwrapped."""
    return any(
        cls.__module__.split(".")[0] in ("httpx", "httpx2") and cls.__name__ in names for cls in type(exc).__mro__
    )


class LoopClients:
    """One SDK client per event loop: `turn_sync` runs each turn in a fresh loop, and an httpx
    pool's connections belong to the loop that opened them."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        client = self.clients.get(loop)
        if client is None:
            client = self.clients[loop] = self.make()
        return client


async def openai_chunks(
    open_stream: Callable[[], Awaitable[Any]],
    *,
    where: str,
    translate: Callable[[Exception], Exception],
    usage: Callable[[str, float, float | None, Any], Usage],
) -> AsyncIterator[Chunk]:
    """Read an OpenAI-style chunk stream (the `openai` SDK's, or litellm's in the same shape):
    a Chunk per piece of text, then a last empty Chunk carrying `usage(text, started,
    first_token_seconds, reported_usage)`; `reported_usage` is the last chunk's `usage`, or
    None when the server sent none. Any exception, from opening or reading, leaves as
    `translate(exc)`; a stream that closes cleanly without a finish_reason is
    ProviderUnavailable (the server cut it)."""
    started = time.perf_counter()
    first: float | None = None
    pieces: list[str] = []
    reported = None
    finished = False
    try:
        chunks = await open_stream()
        async with contextlib.AsyncExitStack() as stack:
            if hasattr(chunks, "__aenter__"):
                # the openai SDK's stream closes its HTTP response on exit; litellm's wrapper
                # is not a context manager
                await stack.enter_async_context(chunks)
            async for chunk in chunks:
                if getattr(chunk, "usage", None) is not None:
                    reported = chunk.usage
                for choice in chunk.choices:
                    finished = finished or choice.finish_reason is not None
                    text = choice.delta.content if choice.delta else None
                    if text:
                        first = first if first is not None else time.perf_counter() - started
                        pieces.append(text)
                        yield Chunk(text)
    except Exception as exc:
        raise translate(exc) from exc
    if not finished:  # the connection closed cleanly but no choice ever finished
        raise ProviderUnavailable(f"{where}: the stream ended before a finish_reason")
    yield Chunk("", usage("".join(pieces), started, first, reported))


def retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds; HTTP dates are not used by
    these APIs)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", "") or exc)


def translate(exc: BaseException, sdk: ModuleType, where: str, key_hint: str) -> ProviderError:
    """The ProviderError for an SDK (or httpx) exception; its message is redacted."""
    def make(cls: type[ProviderError], text: str) -> ProviderError:
        return cls(redact(f"{where}: {text}"))

    if isinstance(exc, sdk.APITimeoutError) or _is_http(exc, "TimeoutException"):
        return make(ProviderTimeout, "the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return make(ProviderUnavailable, f"cannot reach the server: {exc.__cause__ or exc}")
    if _is_http(exc, "TransportError"):
        return make(ProviderUnavailable, f"the connection broke mid-reply: {exc}")
    if isinstance(exc, sdk.APIStatusError):
        status, message = int(getattr(exc, "status_code", 0) or 0), _server_message(exc)
        if status in (401, 403):
            return make(AuthError, f"the API key was refused ({status}: {message}) — check {key_hint}")
        if status == 429:
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return RateLimited(redact(f"{where}: rate limited (429: {message})"), retry_after(headers))
        if status == 404:
            return make(BadRequest, f"not found (404: {message}) — check the model name and base_url")
        if status >= 500 or status in (408, 409):
            return make(ProviderUnavailable, f"server error ({status}: {message})")
        return make(BadRequest, f"the request was refused ({status}: {message}) — check the slot's options (max_tokens, temperature, top_p)")
    if isinstance(exc, sdk.APIError):  # an error event inside a stream
        return make(ProviderUnavailable, f"the stream reported an error: {_server_message(exc)}")
    return make(ProviderError, f"{type(exc).__name__}: {exc}")


# -- tools in the OpenAI chat format (openai, litellm) --------------------------------------


def openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the chat-completions shape: an assistant's tool calls as `tool_calls`,
    each result as a `tool` message naming its call."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.tool_calls:
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls]})
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def openai_tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as chat-completions `tools`."""
    return [{"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}}
            for s in specs]


def openai_tool_calls(message: Any) -> tuple[ToolCall, ...]:
    """The tool calls of a chat-completions reply message (none: an empty tuple)."""
    calls = getattr(message, "tool_calls", None) or ()
    return tuple(
        ToolCall(str(c.id or f"call_{i}"), str(c.function.name or ""), c.function.arguments or "")
        for i, c in enumerate(calls, 1) if getattr(c, "function", None) is not None
    )
