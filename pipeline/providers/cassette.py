"""Cassettes: recorded model calls in a readable YAML file, keyed by a stable request hash.

The key is the first 16 hex digits of a SHA-256 over the provider, the model, the messages
(role and content) and the parameters that change a reply (temperature, max_tokens, top_p,
grammar, seed, ...) — never over where the call went (`base_url`), which key paid for it, or
the failure policy (`timeout`, `retries`, `backoff`, `breaker_*`). Cassettes recorded when the
policy's options still keyed a call are found by their old key too.
Everything written is redacted (`secrets.redact`): keys never reach a cassette.

Tools: a request's tool specs, a message's tool calls and a tool message's call id key a call
only when present (a call without tools keys as before); a reply's tool calls are recorded with
it; and `tool_results` holds what each tool run returned, so a replay serves the recorded
result instead of running the tool again (soul.runtime.tools).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from soul.errors import ProviderError
from soul.providers.base import Message, Request, ToolCall, Usage
from soul.providers.files import read_text
from soul.providers.policy import SLOT_OPTIONS
from soul.providers.secrets import redact, redact_data

FORMAT = 1
MAX_CASSETTE_BYTES = 256 << 20  # a long recording of long prompts; /dev/zero is refused anyway
# Where the call went, who paid, and how hard to try (the failure policy's options, threads):
# none of it changes the reply, so none of it keys a call — a changed `retries` still replays.
NOT_PARAMETERS = frozenset({"base_url", "api_key", "api_key_env", "n_threads", "head_cache"}) | frozenset(
    option for option, _, _ in SLOT_OPTIONS
)
# What keys left out before the policy's options were (cassettes recorded then still replay).
_OLD_NOT_PARAMETERS = frozenset({"base_url", "api_key", "api_key_env", "timeout"})
HEADER = (
    "# soul cassette: recorded model calls, served back by --replay / replay:FILE.\n"
    "# Keys hash provider, model, messages and parameters; secrets are redacted.\n"
)


def split_spec(spec: str) -> tuple[str, str]:
    """`anthropic/claude-x` → (anthropic, claude-x); `scripted:FILE` → (scripted, '')."""
    if "/" in spec:
        provider, model = spec.split("/", 1)
        return provider, model
    return spec.split(":", 1)[0], ""


def parameters(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options that change a reply, sorted: what keys a call."""
    return {k: v for k, v in sorted(options.items()) if k not in NOT_PARAMETERS}


def request_key(provider: str, model: str, messages: Iterable[tuple[Any, ...]], params: Mapping[str, Any]) -> str:
    """The stable hash that names a call: same request, same key, on any machine."""
    payload = {"provider": provider, "model": model, "messages": [list(m) for m in messages], "params": dict(params)}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _keyed(m: Message) -> tuple[Any, ...]:
    """A message as it keys a call: (role, content), plus its tool parts when it has any."""
    if not m.tool_calls and m.tool_call_id is None:
        return (m.role, m.content)
    calls = [[c.id, c.name, c.arguments] for c in m.tool_calls]
    return (m.role, m.content, {"tool_calls": calls, "tool_call_id": m.tool_call_id, "is_error": m.is_error})


def _with_tools(params: dict[str, Any], request: Request) -> dict[str, Any]:
    if request.tools:
        params = {**params, "tools": [[s.name, s.description, s.parameters] for s in request.tools]}
    return params


def key_of(request: Request, spec: str | None = None) -> str:
    """The key `request` is recorded under (as `spec`'s call, if given)."""
    provider, model = split_spec(spec or request.model)
    return request_key(provider, model, (_keyed(m) for m in request.messages), _with_tools(parameters(request.options), request))


def old_key_of(request: Request, spec: str | None = None) -> str:
    """The key an older soul recorded `request` under (policy options included)."""
    provider, model = split_spec(spec or request.model)
    params = {k: v for k, v in sorted(request.options.items()) if k not in _OLD_NOT_PARAMETERS}
    return request_key(provider, model, (_keyed(m) for m in request.messages), _with_tools(params, request))


@dataclass(slots=True)
class Call:
    """One recorded call: the request as sent (redacted), the reply, its chunks and usage."""

    key: str
    provider: str
    model: str
    params: dict[str, Any]
    messages: list[dict[str, str]]
    reply: str
    usage: dict[str, Any]
    chunks: list[str] | None = None
    tool_calls: list[dict[str, str]] | None = None  # the reply's native tool calls: id, name, arguments
    tools: list[dict[str, Any]] | None = None  # the tool specs the request offered

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key": self.key, "provider": self.provider, "model": self.model, "params": self.params,
        }
        if self.tools:
            data["tools"] = self.tools
        data["messages"] = self.messages
        data["reply"] = self.reply
        if self.tool_calls:
            data["tool_calls"] = self.tool_calls
        if self.chunks is not None:
            data["chunks"] = self.chunks
        data["usage"] = self.usage
        return data

    def calls(self) -> tuple[ToolCall, ...]:
        """The reply's tool calls."""
        return tuple(ToolCall(str(c.get("id", "")), str(c.get("name", "")), str(c.get("arguments", ""))) for c in self.tool_calls or ())

    def prompt(self) -> str:
        """The messages as text, for diffs."""
        return render_prompt((m["role"], m["content"]) for m in self.messages)


def render_prompt(messages: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"[{role}]\n{content}" for role, content in messages)


@dataclass
class Cassette:
    """The calls of one recording, in order, and an index by key."""

    path: Path
    calls: list[Call] = field(default_factory=list)
    # Memory recalls of the run (soul.runtime.memory): what the field answered, so a replay sees
    # the field as it was when recorded — the field is the world outside the model too.
    recalls: list[dict[str, Any]] = field(default_factory=list)
    # Tool runs (soul.runtime.tools): tool, arguments, result, error, ms — the tools are the
    # world outside the model too, so a replay serves their recorded results.
    tool_results: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path, *, within: Path | None = None) -> Cassette:
        """Read a cassette; with `within` (the blueprint's folder), as `files.read_text`."""
        path, text = read_text(path, "cassette", MAX_CASSETTE_BYTES, within=within)
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ProviderError(f"cassette {path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
            raise ProviderError(f"cassette {path}: expected a mapping with a 'calls' list (record one with --record)")
        calls = []
        for i, item in enumerate(data["calls"], 1):
            try:
                calls.append(Call(
                    str(item["key"]), str(item["provider"]), str(item.get("model") or ""), dict(item.get("params") or {}),
                    list(item["messages"]), str(item["reply"]), dict(item.get("usage") or {}), item.get("chunks"),
                    [dict(c) for c in item["tool_calls"]] if item.get("tool_calls") else None,
                    list(item["tools"]) if item.get("tools") else None,
                ))
            except (KeyError, TypeError, ValueError) as exc:
                raise ProviderError(f"cassette {path}: call {i} is malformed ({exc})") from exc
        recalls = data.get("recalls") or []
        if not isinstance(recalls, list) or not all(isinstance(r, dict) and "query" in r and isinstance(r.get("hits"), list) for r in recalls):
            raise ProviderError(f"cassette {path}: 'recalls' must be a list of {{query, hits}} mappings")
        tool_results = data.get("tool_results") or []
        if not isinstance(tool_results, list) or not all(isinstance(r, dict) and isinstance(r.get("tool"), str) for r in tool_results):
            raise ProviderError(f"cassette {path}: 'tool_results' must be a list of {{tool, arguments, result, error}} mappings")
        return cls(path, calls, recalls, tool_results)

    def by_key(self) -> dict[str, list[Call]]:
        index: dict[str, list[Call]] = {}
        for call in self.calls:
            index.setdefault(call.key, []).append(call)
        return index

    def add(self, request: Request, reply: str, usage: Usage, chunks: Sequence[str] | None,
            tool_calls: Sequence[ToolCall] = ()) -> Call:
        """Record a call (redacted) and write the file."""
        provider, model = split_spec(request.model)
        call = Call(
            key=key_of(request),
            provider=provider,
            model=model,
            params=redact_data(parameters(request.options)),
            messages=[_message_data(m) for m in request.messages],
            reply=redact(reply),
            usage=_usage_data(usage),
            chunks=[redact(c) for c in chunks] if chunks is not None else None,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": redact(c.arguments)} for c in tool_calls] or None,
            tools=[{"name": s.name, "description": s.description, "parameters": s.parameters} for s in request.tools] or None,
        )
        self.calls.append(call)
        self.save()
        return call

    def add_tool_result(self, tool: str, arguments: Mapping[str, Any], result: str | None, error: str | None, ms: float) -> None:
        """Record what a tool run returned (redacted) and write the file."""
        self.tool_results.append({
            "tool": tool, "arguments": redact_data(dict(arguments)),
            "result": redact(result) if result is not None else None,
            "error": redact(error) if error is not None else None, "ms": round(ms, 3),
        })
        self.save()

    def save(self) -> None:
        """Write atomically: a run killed mid-write leaves the previous file whole."""
        text = HEADER + yaml.dump(
            {"format": FORMAT, "calls": [c.to_data() for c in self.calls],
             **({"recalls": self.recalls} if self.recalls else {}),
             **({"tool_results": self.tool_results} if self.tool_results else {})},
            Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, self.path)


def _message_data(m: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": m.role, "content": redact(m.content)}
    if m.tool_calls:
        data["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": redact(c.arguments)} for c in m.tool_calls]
    if m.tool_call_id is not None:
        data["tool_call_id"] = m.tool_call_id
    if m.is_error:
        data["is_error"] = True
    if m.cache_points:  # where a provider may cache the prompt: shown, never part of the key
        data["cache_points"] = list(m.cache_points)
    return data


def _usage_data(usage: Usage) -> dict[str, Any]:
    # Timings are recorded for the reader but rounded; replays report them as recorded.
    data: dict[str, Any] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                            "latency_s": round(usage.latency_s, 3)}
    if usage.first_token_s is not None:
        data["first_token_s"] = round(usage.first_token_s, 3)
    if usage.cost is not None:
        data["cost"] = usage.cost
    if usage.cache_read_tokens:
        data["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        data["cache_write_tokens"] = usage.cache_write_tokens
    return data


def usage_from(data: Mapping[str, Any]) -> Usage:
    return Usage(
        int(data.get("input_tokens", 0)), int(data.get("output_tokens", 0)), float(data.get("latency_s", 0.0)),
        data.get("first_token_s"), data.get("cost"),
        int(data.get("cache_read_tokens", 0)), int(data.get("cache_write_tokens", 0)),
    )


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so prompts and replies read as written."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
