"""`claude-cli/MODEL` — the Claude Code CLI as a subprocess, as the AgentCSD seed runs it.

Each call runs `claude -p --output-format stream-json --verbose --include-partial-messages`
with the system prompt as `--system-prompt` and the conversation on stdin, and reads one JSON
object per line: `stream_event` lines carry text deltas, `assistant` lines whole messages (used
when no deltas came), and the final `result` line the usage and cost. The binary is found on
PATH (or `$SOUL_CLAUDE_BIN`); the CLI uses its own login, so no key passes through soul.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from soul.errors import AuthError, ProviderError, ProviderTimeout, ProviderUnavailable
from soul.providers.base import Chunk, Completion, Provider, Request, Usage, estimate_tokens
from soul.providers.secrets import redact

DEFAULT_TIMEOUT = 300.0  # the CLI starts a Node process and may think at length
BINARY_ENV = "SOUL_CLAUDE_BIN"


def _prompt(request: Request) -> str:
    """The non-system messages as one prompt: the lone user message as is, else a transcript."""
    turns = [m for m in request.messages if m.role != "system"]
    if len(turns) == 1:
        return turns[0].content
    return "\n\n".join(f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}" for m in turns)


class ClaudeCLIProvider(Provider):
    """Completions from the `claude` command."""

    name = "claude-cli"
    can_stream = True

    def __init__(self, model: str, options: Mapping[str, Any]) -> None:
        wanted = os.environ.get(BINARY_ENV) or "claude"
        binary = shutil.which(wanted)
        if binary is None:
            raise ProviderError(
                f"claude-cli/{model}: the Claude Code CLI ('{wanted}') is not on PATH — install it "
                "(npm install -g @anthropic-ai/claude-code) and log in once with `claude`, "
                f"set {BINARY_ENV} to its path, or use another model"
            )
        self.binary = binary
        self.model = model
        self.timeout = float(options.get("timeout") or DEFAULT_TIMEOUT)
        self.where = f"claude-cli/{model}"

    def command(self, request: Request) -> list[str]:
        argv = [self.binary, "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"]
        if self.model and self.model != "default":
            argv += ["--model", self.model]
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        if system:
            argv += ["--system-prompt", system]
        return argv

    async def complete(self, request: Request) -> Completion:
        pieces: list[str] = []
        usage = Usage()
        async for chunk in self.stream(request):
            pieces.append(chunk.text)
            usage = chunk.usage or usage
        return Completion("".join(pieces), usage)

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        started = time.perf_counter()
        deadline = started + self.timeout
        process = await asyncio.create_subprocess_exec(
            *self.command(request),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=16 * 1024 * 1024,  # one stream-json line holds a whole message
        )
        first: float | None = None
        streamed: list[str] = []
        result: dict[str, Any] | None = None
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(_prompt(request).encode())
            with contextlib.suppress(ConnectionError):  # it may exit before reading all of it
                await process.stdin.drain()
            process.stdin.close()
            while True:
                try:
                    line = await asyncio.wait_for(process.stdout.readline(), max(0.0, deadline - time.perf_counter()))
                except TimeoutError:
                    raise ProviderTimeout(f"{self.where}: no reply within {self.timeout:g} s") from None
                if not line:
                    break
                event = _event(line)
                for text in _texts(event, partial=bool(streamed)):
                    first = first if first is not None else time.perf_counter() - started
                    streamed.append(text)
                    yield Chunk(text)
                if event.get("type") == "result":
                    result = event
            await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if result is None or result.get("is_error"):
            raise await self._failure(process, result)
        reported = result.get("usage") or {}
        text = "".join(streamed)
        usage = Usage(
            int(reported.get("input_tokens") or estimate_tokens([m.content for m in request.messages])),
            int(reported.get("output_tokens") or estimate_tokens([text])),
            time.perf_counter() - started,
            first,
            result.get("total_cost_usd"),
        )
        yield Chunk("", usage)

    async def _failure(self, process: asyncio.subprocess.Process, result: dict[str, Any] | None) -> ProviderError:
        stderr = (await process.stderr.read()).decode(errors="replace").strip() if process.stderr else ""
        said = redact(str((result or {}).get("result") or stderr or f"exit status {process.returncode}"))[:500]
        if any(word in said.lower() for word in ("log in", "login", "api key", "unauthorized", "authentication")):
            return AuthError(f"{self.where}: the CLI is not logged in ({said}) — run `claude` once to log in")
        return ProviderUnavailable(f"{self.where}: the CLI failed: {said}")


def _event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:  # the CLI may print warnings that are not JSON
        return {}
    return event if isinstance(event, dict) else {}


def _texts(event: dict[str, Any], partial: bool) -> list[str]:
    """The reply text in one stream-json event. Whole `assistant` messages count only when no
    deltas came before them (with partial messages on, they repeat what the deltas said)."""
    kind = event.get("type")
    if kind == "stream_event":
        inner = event.get("event") or {}
        delta = inner.get("delta") or {}
        if inner.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
            return [delta.get("text", "")]
    elif kind == "assistant" and not partial:
        content = (event.get("message") or {}).get("content") or []
        return [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
    return []
