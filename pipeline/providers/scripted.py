"""`scripted:FILE` — canned replies, consumed one per model call (tests, demos, CI).

The file is a YAML or JSON list of raw model replies, at most `MAX_SCRIPT_BYTES`; named in a
blueprint, it must lie inside the blueprint's folder (`files.read_text`). Running out is an
error that says how many calls were made. Replies stream in small pieces so streaming paths are exercised too.

A reply may also be a mapping, a native tool call: `{tool_calls: [{name: NAME, arguments:
{...}}], text: ...}` (`arguments` a mapping or JSON text, `id` optional). A script holding
one acts as a provider with native tool calling (`can_call_tools`); a script of strings only,
as one without it (the model writes `<tool_call name="...">` in its text: docs/tools.md).
A mapping may say `seconds: N`: that reply comes N seconds late, as a slow model's would
(`{text: ..., seconds: 3}`; a demo of streaming, or a test that kills a worker mid-turn).

`soul run --script FILE` also takes a mapping of model slot names to lists
(`{conscious: [...], subconscious: [...]}`, and `default: [...]` for every other call):
`ScriptedProvider.from_script` reads either form; a mapping becomes `SlotScripts`, which a
Soul accepts as its provider (each slot's calls consume that slot's list).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from soul.errors import ProviderError
from soul.providers.arguments import arguments_json
from soul.providers.base import Chunk, Clock, Completion, Provider, Request, ToolCall
from soul.providers.files import read_text

CHUNK_CHARS = 7  # small and odd, so chunk boundaries fall inside tags and entities
MAX_SCRIPT_BYTES = 4 << 20  # canned replies for tests and demos; far more is a mistake


class ScriptExhausted(ProviderError):
    """The scripted provider has no reply left."""


class ScriptedProvider(Provider):
    """Replies from a list, in order; one per call."""

    name = "scripted"
    can_stream = True

    def __init__(self, replies: Sequence[str | Mapping[str, Any]], source: str = "<list>", *,
                 latency: float = 0.0) -> None:
        """`latency`: seconds each call waits before answering, as a model would (benchmarks)."""
        self.replies = list(replies)
        self.latency = latency
        parsed = [_reply(r, source, i) for i, r in enumerate(self.replies, 1)]
        self._parsed = [(text, calls) for text, calls, _ in parsed]
        self._delays = [seconds for _, _, seconds in parsed]
        self.source = source
        self.calls = 0
        self.requests: list[Request] = []
        # native tool calling when any reply is a tool call (an instance attribute: per script)
        self.can_call_tools = any(calls for _, calls in self._parsed)

    @classmethod
    def from_file(cls, path: str | Path, *, within: Path | None = None) -> ScriptedProvider:
        """Load replies from a YAML or JSON list; with `within` (the blueprint's folder), a
        relative path is read from there and a path outside it is refused."""
        path, data = _read(path, within)
        if isinstance(data, Mapping):
            raise ProviderError(
                f"scripted replies: {path} maps model slots to replies; a `scripted:` model "
                "takes one list (one raw model reply per call) — pass the mapping to `soul run --script`"
            )
        return cls(_replies(data, path), str(path))

    @classmethod
    def from_script(cls, path: str | Path) -> ScriptedProvider | SlotScripts:
        """What `soul run --script FILE` holds: a list (one list for every call) or a mapping
        of model slot names to lists (`default:` for the calls no other key names)."""
        path, data = _read(path, None)
        if not isinstance(data, Mapping):
            return cls(_replies(data, path, hint=" or a mapping of model slot names to such lists"), str(path))
        if not data:
            raise ProviderError(f"scripted replies: {path} maps no model slot: write `SLOT: [reply, ...]` per slot")
        slots = {}
        for slot, replies in data.items():
            if not isinstance(slot, str) or not slot:
                raise ProviderError(f"scripted replies: {path}: key {slot!r} is not a model slot name")
            slots[slot] = cls(_replies(replies, path, slot), f"{path} [{slot}]")
        return SlotScripts(slots, str(path))

    def _next(self, request: Request) -> tuple[str, tuple[ToolCall, ...]]:
        self._wait = self._delays[self.calls] if self.calls < len(self._delays) else 0.0
        if self.calls >= len(self.replies):
            raise ScriptExhausted(
                f"scripted replies ran out: {self.source} has {len(self.replies)} "
                f"repl{'y' if len(self.replies) == 1 else 'ies'}, and call {self.calls + 1} needs another"
            )
        self.requests.append(request)
        reply = self._parsed[self.calls]
        self.calls += 1
        return reply

    async def complete(self, request: Request) -> Completion:
        clock = Clock()
        reply, calls = self._next(request)
        if self.latency + self._wait > 0:
            await asyncio.sleep(self.latency + self._wait)
        clock.token()
        return Completion(reply, clock.usage(request, reply), calls)

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        clock = Clock()
        reply, _ = self._next(request)  # a stream carries text only (tool calls: `complete`)
        if self.latency + self._wait > 0:
            await asyncio.sleep(self.latency + self._wait)
        for i in range(0, len(reply), CHUNK_CHARS):
            clock.token()
            yield Chunk(reply[i : i + CHUNK_CHARS])
        yield Chunk("", clock.usage(request, reply))


class SlotScripts(Mapping[str, ScriptedProvider]):
    """Scripted replies per model slot, read from one file (`ScriptedProvider.from_script`).

    A Soul given this as its provider sends each call to its slot's list; a call on a model
    that is no slot of the blueprint, or on a slot the file lacks, takes the `default` list
    when there is one (`Soul.provider_for`)."""

    def __init__(self, slots: Mapping[str, ScriptedProvider], source: str) -> None:
        self._slots = dict(slots)
        self.source = source

    def __getitem__(self, slot: str) -> ScriptedProvider:
        return self._slots[slot]

    def __iter__(self) -> Iterator[str]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def __repr__(self) -> str:
        return f"SlotScripts({self.source!r}, slots={list(self._slots)})"


def _read(path: str | Path, within: Path | None) -> tuple[Path, object]:
    path, text = read_text(path, "scripted replies", MAX_SCRIPT_BYTES, within=within)
    try:
        return path, json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:  # json errors are ValueErrors
        raise ProviderError(f"scripted replies: {path} is not valid YAML/JSON: {exc}") from exc


def _reply(item: str | Mapping[str, Any], source: str, n: int) -> tuple[str, tuple[ToolCall, ...], float]:
    """A reply as (text, tool calls, seconds late): a string, or a mapping with `tool_calls`
    and `text`, or `text` and `seconds`."""
    if isinstance(item, str):
        return item, (), 0.0
    calls = item.get("tool_calls", [] if "seconds" in item else None)
    text = item.get("text", "")
    seconds = item.get("seconds", 0.0)
    if (not isinstance(calls, list) or not (calls or "seconds" in item) or not isinstance(text, str)
            or set(item) - {"tool_calls", "text", "seconds"} or isinstance(seconds, bool)
            or not isinstance(seconds, int | float) or not 0 <= seconds <= 3600):
        raise ProviderError(f"scripted replies: {source}: reply {n} must be a string or a mapping "
                            "{tool_calls: [{name: TOOL, arguments: {...}}], text: ...} (or {text: ..., seconds: N},"
                            " N from 0 to 3600)")
    out = []
    for i, call in enumerate(calls, 1):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ProviderError(f"scripted replies: {source}: reply {n}, tool call {i} needs a `name`")
        arguments = call.get("arguments", {})
        text_arguments = arguments if isinstance(arguments, str) else arguments_json(arguments)
        out.append(ToolCall(str(call.get("id") or f"call_{n}_{i}"), call["name"], text_arguments))
    return text, tuple(out), float(seconds)


def _replies(data: object, path: Path, slot: str | None = None, hint: str = "") -> list[str | Mapping[str, Any]]:
    if isinstance(data, list) and all(isinstance(r, str | Mapping) for r in data):
        return data
    if slot is None:
        raise ProviderError(f"scripted replies: {path} must be a list of strings (one raw model reply per call){hint}")
    raise ProviderError(f"scripted replies: {path}: slot '{slot}' must be a list of strings (one raw model reply per call)")
