"""Record and replay: `RecordingProvider` wraps a live provider and writes each call to a
cassette; `ReplayProvider` (`replay:CASSETTE`, `--replay CASSETTE`) serves them back with no
network. A request the cassette does not hold is a `ReplayMiss` naming the nearest recorded
call and showing a diff of the two prompts.

A request recorded several times (the same message in two sessions) is served in recorded
order, the last one repeating. Under a `replay:` model string the request's own model is the
cassette, so the key is tried with each provider/model the cassette holds.

Tools: a replay calls tools natively when the recording did (a recorded call offered tools)
and serves recorded tool calls back; `tape` tells the runtime to serve tool results from the
cassette (replay) or to write them there (record): soul.runtime.tools.
"""

from __future__ import annotations

import difflib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from soul.errors import ReplayMiss
from soul.providers.base import Chunk, Completion, Provider, Request, Usage
from soul.providers.cassette import (
    Call,
    Cassette,
    key_of,
    old_key_of,
    parameters,
    render_prompt,
    usage_from,
)
from soul.providers.secrets import redact

MAX_DIFF_LINES = 60
REPLAY_PREFIX = "replay:"


class ReplayProvider(Provider):
    """Recorded replies, by request key."""

    name = "replay"
    can_stream = True
    tape = "replay"

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.can_call_tools = any(c.tools for c in cassette.calls)
        self.index = cassette.by_key()
        self.served: dict[str, int] = {}
        self.specs = sorted({f"{c.provider}/{c.model}" if c.model else c.provider for c in cassette.calls})

    @classmethod
    def from_file(cls, path: str | Path, *, within: Path | None = None) -> ReplayProvider:
        """Serve a cassette file (`within`: the blueprint's folder, see `Cassette.load`)."""
        return cls(Cassette.load(path, within=within))

    def _keys(self, request: Request) -> list[str]:
        specs = self.specs if request.model.startswith(REPLAY_PREFIX) else [None]
        keys = [key_of(request, spec) for spec in specs]
        # Then the keys older cassettes used (they also hashed retries, backoff, ...).
        return keys + [k for k in (old_key_of(request, spec) for spec in specs) if k not in keys]

    def find(self, request: Request) -> Call:
        """The recorded call for `request`, or ReplayMiss."""
        for key in self._keys(request):
            calls = self.index.get(key)
            if calls:
                n = self.served.get(key, 0)
                self.served[key] = n + 1
                return calls[min(n, len(calls) - 1)]
        raise ReplayMiss(self._miss(request))

    def _miss(self, request: Request) -> str:
        keys = self._keys(request)
        head = f"replay miss: {self.cassette.path} holds no call for {request.model} (key {keys[0] if keys else '-'})"
        if not self.cassette.calls:
            return head + "; the cassette is empty — record one with --record"
        asked = redact(render_prompt((m.role, m.content) for m in request.messages))
        nearest, ratio = max(
            ((call, difflib.SequenceMatcher(None, call.prompt(), asked, autojunk=False).ratio()) for call in self.cassette.calls),
            key=lambda pair: pair[1],
        )
        lines = list(difflib.unified_diff(
            nearest.prompt().splitlines(), asked.splitlines(), "recorded", "requested", n=2, lineterm="",
        ))
        if len(lines) > MAX_DIFF_LINES:
            lines = [*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more diff lines)"]
        where = f"{nearest.provider}/{nearest.model}" if nearest.model else nearest.provider
        params = parameters(request.options)
        recorded = parameters(nearest.params)
        notes = [] if params == recorded else [f"parameters differ: recorded {recorded}, requested {params}"]
        if not lines:
            notes.append("the prompts are the same; the provider, model or parameters differ")
        body = "\n".join([*notes, *lines])
        return f"{head}.\nNearest recorded call: key {nearest.key} ({where}, {ratio:.1%} alike):\n{body}"

    async def complete(self, request: Request) -> Completion:
        call = self.find(request)
        return Completion(call.reply, usage_from(call.usage), call.calls())

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        call = self.find(request)
        for piece in call.chunks if call.chunks is not None else [call.reply]:
            yield Chunk(piece)
        yield Chunk("", usage_from(call.usage))


class RecordingProvider(Provider):
    """A provider whose every completed call is written to a cassette."""

    tape = "record"

    def __init__(self, inner: Provider, cassette: Cassette) -> None:
        self.inner = inner
        self.cassette = cassette
        self.name = inner.name
        self.can_stream = inner.can_stream
        self.can_call_tools = inner.can_call_tools

    async def complete(self, request: Request) -> Completion:
        completion = await self.inner.complete(request)
        self.cassette.add(request, completion.text, completion.usage, None, completion.tool_calls)
        return completion

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        pieces: list[str] = []
        usage = Usage()
        async for chunk in self.inner.stream(request):
            if chunk.text:
                pieces.append(chunk.text)
            if chunk.usage is not None:
                usage = chunk.usage
            yield chunk
        # Only a stream that ran to its end is recorded: a cut one has no reply to serve back.
        self.cassette.add(request, "".join(pieces), usage, pieces)


class Recorder:
    """Wraps each provider into a RecordingProvider on one cassette (also given to the soul,
    which records its memory recalls there: soul.runtime.memory)."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette

    def __call__(self, provider: Provider) -> Provider:
        return RecordingProvider(provider, self.cassette)


def recording(path: str | Path) -> Callable[[Provider], Provider]:
    """A wrapper that records every call into a fresh cassette at `path` (a recording replaces
    what the file held); pass it as `soul.load(..., wrap=recording(path))`."""
    cassette = Cassette(Path(path))
    cassette.save()
    return Recorder(cassette)
