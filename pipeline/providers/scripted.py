"""`scripted:FILE` — canned replies, consumed one per model call (tests, demos, CI).

The file is a YAML or JSON list of raw model replies, at most `MAX_SCRIPT_BYTES`; named in a
blueprint, it must lie inside the blueprint's folder (`files.read_text`). Running out is an
error that says how many calls were made. Replies stream in small pieces so streaming paths are exercised too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import yaml

from soul.errors import ProviderError
from soul.providers.base import Chunk, Clock, Completion, Provider, Request
from soul.providers.files import read_text

CHUNK_CHARS = 7  # small and odd, so chunk boundaries fall inside tags and entities
MAX_SCRIPT_BYTES = 4 << 20  # canned replies for tests and demos; far more is a mistake


class ScriptExhausted(ProviderError):
    """The scripted provider has no reply left."""


class ScriptedProvider(Provider):
    """Replies from a list, in order; one per call."""

    name = "scripted"
    can_stream = True

    def __init__(self, replies: Sequence[str], source: str = "<list>") -> None:
        self.replies = list(replies)
        self.source = source
        self.calls = 0
        self.requests: list[Request] = []

    @classmethod
    def from_file(cls, path: str | Path, *, within: Path | None = None) -> ScriptedProvider:
        """Load replies from a YAML or JSON list; with `within` (the blueprint's folder), a
        relative path is read from there and a path outside it is refused."""
        path, text = read_text(path, "scripted replies", MAX_SCRIPT_BYTES, within=within)
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:  # json errors are ValueErrors
            raise ProviderError(f"scripted replies: {path} is not valid YAML/JSON: {exc}") from exc
        if not isinstance(data, list) or not all(isinstance(r, str) for r in data):
            raise ProviderError(f"scripted replies: {path} must be a list of strings (one raw model reply per call)")
        return cls(data, str(path))

    def _next(self, request: Request) -> str:
        if self.calls >= len(self.replies):
            raise ScriptExhausted(
                f"scripted replies ran out: {self.source} has {len(self.replies)} "
                f"repl{'y' if len(self.replies) == 1 else 'ies'}, and call {self.calls + 1} needs another"
            )
        self.requests.append(request)
        reply = self.replies[self.calls]
        self.calls += 1
        return reply

    async def complete(self, request: Request) -> Completion:
        clock = Clock()
        reply = self._next(request)
        clock.token()
        return Completion(reply, clock.usage(request, reply))

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        clock = Clock()
        reply = self._next(request)
        for i in range(0, len(reply), CHUNK_CHARS):
            clock.token()
            yield Chunk(reply[i : i + CHUNK_CHARS])
        yield Chunk("", clock.usage(request, reply))
