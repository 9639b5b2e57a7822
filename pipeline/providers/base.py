"""The provider interface: one async call that completes or streams, with usage.

The runtime hands a provider messages and gets text back; a provider knows nothing of step
kinds. Foreign SDK errors are translated into `ProviderError` subclasses at this boundary.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Message:
    """One message of a model call: who says it and what."""

    role: Role
    content: str


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Usage:
    """Tokens and time of one call; `cost` in USD where the provider reports prices."""

    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    first_token_s: float | None = None
    cost: float | None = None


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Request:
    """One model call."""

    model: str
    messages: tuple[Message, ...]
    options: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()  # the XML sections asked for, in order
    grammar: str | None = None  # GBNF for the reply, for providers that want one (local models)


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Completion:
    text: str
    usage: Usage


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
