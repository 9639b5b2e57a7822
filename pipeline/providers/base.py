"""The provider interface: one async call that completes or streams, with usage.

The runtime hands a provider messages and gets text back; a provider knows nothing of step
kinds. Foreign SDK errors are translated into `ProviderError` subclasses at this boundary.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool a model may call: its name, what it does, and its arguments' JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A model's request to call a tool; `arguments` is the JSON text the model wrote (kept
    as written, so arguments that are not JSON can be reported back to the model)."""

    id: str
    name: str
    arguments: str


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable. Not
# slotted either: a turn's trace holds its messages, and orjson encodes a plain dataclass from
# its __dict__ several times faster than a slotted one field by field (~0.3 us a message).
@dataclass
class Message:
    """One message of a model call: who says it and what. An assistant message may carry
    the tool calls it made; a `tool` message answers the call `tool_call_id` (native tool
    calling only: soul.runtime.tool_loop)."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False  # a tool message reporting a failed call
    # Where a prefix that stays the same from call to call ends: offsets into `content`, in
    # order (the prompt builder marks the persona's end and the summary's in the system
    # message). Providers that cache prompts put a breakpoint there (Anthropic: `cache_control`);
    # the text is the same either way, and the marks never key a cassette.
    cache_points: tuple[int, ...] = ()


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Usage:
    """Tokens and time of one call; `cost` in USD where the provider reports prices.

    `input_tokens` are the prompt tokens billed at the full input price; prompt tokens read
    from a provider's prompt cache are `cache_read_tokens` (Anthropic's cache reads, OpenAI's
    `cached_tokens`, the local model's saved prompt head), and those written to it
    `cache_write_tokens` (Anthropic's cache creation). The prompt is their sum (`prompt_tokens`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    first_token_s: float | None = None
    cost: float | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable. Its
# own `__init__`: a dataclass's tests `options` against its default factory's marker first,
# which made a Request cost half as much again as a dataclass of plain defaults.
@dataclass(slots=True, init=False)
class Request:
    """One model call."""

    model: str
    messages: tuple[Message, ...]
    options: dict[str, Any]
    tags: tuple[str, ...]  # the XML sections asked for, in order
    grammar: str | None  # GBNF for the reply, for providers that want one (local models)
    tools: tuple[ToolSpec, ...]  # tools the model may call (providers with can_call_tools)

    def __init__(self, model: str, messages: tuple[Message, ...], options: dict[str, Any] | None = None,
                 tags: tuple[str, ...] = (), grammar: str | None = None, tools: tuple[ToolSpec, ...] = ()) -> None:
        self.model = model
        self.messages = messages
        self.options = {} if options is None else options  # (each request its own when none is given)
        self.tags = tags
        self.grammar = grammar
        self.tools = tools


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Completion:
    text: str
    usage: Usage
    tool_calls: tuple[ToolCall, ...] = ()  # native tool calls the model made


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Chunk:
    """A piece of a streamed reply; the last chunk carries the usage."""

    text: str
    usage: Usage | None = None


class Provider(ABC):
    """A source of completions. Subclasses implement `complete`; streaming is optional."""

    name: str = "provider"
    can_stream: bool = False
    wants_grammar: bool = False  # constrain decoding with `Request.grammar` (llama.cpp)
    # Native tool calling: `Request.tools` in, `Completion.tool_calls` out. Without it the
    # runtime describes tools in the prompt and reads `<tool_call>` from the text.
    can_call_tools: bool = False
    # The model's context window in tokens, when the provider knows it (the local model: its
    # n_ctx); None lets `soul.providers.windows` decide from the slot and the model name.
    context_window: int | None = None

    @abstractmethod
    async def complete(self, request: Request) -> Completion:
        """The whole reply to `request`."""

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        """The reply in pieces; by default one piece (providers that can stream override)."""
        completion = await self.complete(request)
        yield Chunk(completion.text, completion.usage)


def estimate_tokens(texts: Sequence[str]) -> int:
    """A rough count (4 characters a token) for providers that report none."""
    return sum(max(1, len(t) // 4) for t in texts if t)


class Clock:
    """Measures a call: latency and time to first token."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None

    def token(self) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.start

    def usage(self, request: Request, reply: str) -> Usage:
        return Usage(
            input_tokens=estimate_tokens([m.content for m in request.messages]),
            output_tokens=estimate_tokens([reply]),
            latency_s=time.perf_counter() - self.start,
            first_token_s=self.first,
        )
