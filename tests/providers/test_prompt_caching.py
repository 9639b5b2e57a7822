"""Prompt caching (docs/providers.md, "Prompt caching"): on Anthropic the system prompt is cut
into text blocks at its stable prefixes (the persona, the summary), each carrying
`cache_control`, in fused and chained modes, without changing the text the model reads; cache
reads and writes are counted in the usage, the trace, the cost and the cassette. OpenAI's
automatic caching is reported from `prompt_tokens_details.cached_tokens`. The wire server
(127.0.0.1) keeps a prompt cache the way the Messages API does."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from conftest import REPLY
from wire_server import WireServer

import soul
from soul.providers import ReplayProvider, Request, recording, resolve
from soul.providers.sdk import cost
from soul.runtime.conversation import ConversationSummary
from soul.runtime.turn.context import TurnContext
from soul.runtime.turn.prompting.blocks import cache_points
from soul.runtime.turn.prompting.prompt import Message, PromptBuilder

pytest.importorskip("anthropic")

MODEL = "claude-haiku-4-5"
PERSONA = "You are Wired, a terse test soul.\n\n" + "You keep your answers short and plain. " * 60


def long_soul(folder: Path, base_url: str, mode: str = "fused") -> Path:
    (folder / "wired.md").write_text(PERSONA)
    steps = ("  think: {uses: internal_monologue}\n  reply: {uses: external_dialogue, after: [think]}\n")
    path = folder / "wired.yaml"
    path.write_text(textwrap.dedent(f"""\
        soul: wired
        version: 1
        persona: wired.md
        model: main
        mode: {mode}
        models:
          main:
            provider: anthropic/{MODEL}
            base_url: {base_url}
        steps:
        """) + steps)
    return path


def joined(system: object) -> str:
    assert isinstance(system, list)
    return "".join(block["text"] for block in system)


def test_the_system_prompt_is_cut_at_its_marks_and_reads_the_same(wire: WireServer, keys: str) -> None:
    text = "PERSONA" * 10 + "\n\n## User Model\nnothing yet\n\n## Earlier\na summary" + "\n\n## Response Format\n..."
    persona_end, summary_end = len("PERSONA" * 10), text.index("\n\n## Response Format")
    messages = (Message("system", text, cache_points=(persona_end, summary_end)), Message("user", "Say hello."))
    provider = resolve(f"anthropic/{MODEL}", {"base_url": wire.anthropic_url})
    asyncio.run(provider.complete(Request(f"anthropic/{MODEL}", messages)))
    system = wire.requests[0].body["system"]
    assert joined(system) == text  # what the model reads is unchanged
    assert [b["text"] for b in system] == [text[:persona_end], text[persona_end:summary_end], text[summary_end:]]
    assert [b.get("cache_control") for b in system] == [{"type": "ephemeral"}, {"type": "ephemeral"}, None]
    # without marks the system prompt stays one string, as before
    asyncio.run(provider.complete(Request(f"anthropic/{MODEL}", (Message("system", text), Message("user", "hi")))))
    assert wire.requests[1].body["system"] == text


@pytest.mark.parametrize("mode", ["fused", "chained"])
def test_a_soul_turn_marks_its_persona_and_the_next_call_reads_it_from_the_cache(
        tmp_path: Path, wire: WireServer, keys: str, mode: str) -> None:
    wire.default_reply = REPLY
    path = long_soul(tmp_path, wire.anthropic_url, mode)
    with soul.load(path) as s:
        session = s.session()
        first = session.turn_sync("Hello?")
        second = session.turn_sync("Again?")
    for request in wire.requests:
        system = request.body["system"]
        assert system[0]["text"] == PERSONA.strip() and system[0]["cache_control"] == {"type": "ephemeral"}
        assert joined(system).startswith(PERSONA.strip() + "\n\n")
    calls = [*first.trace.calls, *second.trace.calls]
    assert calls[0].cache_write_tokens > 0 and calls[0].cache_read_tokens == 0
    assert all(c.cache_read_tokens > 0 for c in calls[1:])  # the persona, read back
    later = calls[-1]
    uncached = cost("anthropic", MODEL, later.input_tokens + later.cache_read_tokens, later.output_tokens)
    priced = (later.cost or {}).get("usd")  # the trace keeps the price table's record of the call
    assert priced is not None and uncached is not None and priced < uncached
    assert second.trace.summary()["cache_read_tokens"] == sum(c.cache_read_tokens for c in second.trace.calls)


def test_the_summary_ends_the_second_stable_prefix() -> None:
    from soul.compiler import compile_blueprint

    plan = compile_blueprint("claudius")
    builder = PromptBuilder(plan.blueprint)
    summary = ConversationSummary("They talked about boats.", 1, 6)
    ctx = TurnContext("And now?", user_model="Likes boats.", summary=summary)
    steps = [s for s in plan.turn.steps.values() if s.kind.llm]
    messages, _ = builder.fit(steps, ctx)
    system = messages[0]
    persona_end, summary_end = system.cache_points
    assert system.content[:persona_end] == builder.persona
    assert system.content[:summary_end].endswith(summary.section())
    assert "## User Model: user\nLikes boats." in system.content[persona_end:summary_end]


def test_cache_points_of_a_head_without_a_summary_mark_only_the_persona() -> None:
    assert cache_points("P", "P\n\nstate", "") == (1,)
    assert cache_points("P", "P", "S") == (1, 4)
    assert cache_points("", "", "S") == (1,)


def test_a_recorded_anthropic_turn_keeps_the_breakpoints_and_the_cache_usage(tmp_path: Path, wire: WireServer, keys: str) -> None:
    wire.default_reply = REPLY
    path = long_soul(tmp_path, wire.anthropic_url)
    cassette = tmp_path / "tape.yaml"
    with soul.load(path, wrap=recording(cassette)) as s:
        session = s.session()
        session.turn_sync("Hello?")
        recorded = session.turn_sync("Again?")
    text = cassette.read_text()
    assert "cache_points:" in text and "cache_read_tokens:" in text and "cache_write_tokens:" in text
    with soul.load(path, provider=ReplayProvider.from_file(cassette)) as s:
        session = s.session()
        session.turn_sync("Hello?")
        replayed = session.turn_sync("Again?")
    assert replayed.trace.calls[0].cache_read_tokens == recorded.trace.calls[0].cache_read_tokens > 0
    assert replayed.reply == recorded.reply


def test_openai_reports_its_automatic_cache_from_cached_tokens(wire: WireServer, keys: str) -> None:
    wire.openai_cached = 8
    provider = resolve("openai/gpt-4o", {"base_url": wire.openai_url})
    request = Request("openai/gpt-4o", (Message("system", "You are terse. " * 20), Message("user", "Say hello.")))
    usage = asyncio.run(provider.complete(request)).usage
    assert usage.cache_read_tokens == 8 and usage.cache_write_tokens == 0
    assert usage.prompt_tokens == usage.input_tokens + 8
    full = cost("openai", "gpt-4o", usage.prompt_tokens, usage.output_tokens)
    assert usage.cost is not None and full is not None and usage.cost == pytest.approx(full - 8 * 2.5 * 0.5 / 1e6)

    async def streamed() -> object:
        chunks = [c async for c in provider.stream(request)]
        return chunks[-1].usage

    last = asyncio.run(streamed())
    assert last.cache_read_tokens == 8  # type: ignore[attr-defined]
