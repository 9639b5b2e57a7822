"""Turns: fused and chained calls, gates, parallel layers, re-ask, fallback, resume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from souls import SAMANTHA_LEARNS, SAMANTHA_TURN, claudius_reply, fan_of_three

import soul
from soul.errors import ProviderError, RunError
from soul.providers.base import Chunk, Completion, Provider, Request, Usage
from soul.providers.scripted import ScriptedProvider, ScriptExhausted
from soul.runtime.turn.calls import FALLBACK_REPLY


def claudius(replies: list[str], home: Path) -> tuple[soul.Soul, ScriptedProvider]:
    provider = ScriptedProvider(replies)
    return soul.load("claudius", provider=provider, home=home), provider


def test_a_fused_turn_makes_one_call_and_splits_it_per_step(soul_home: Path) -> None:
    s, provider = claudius([claudius_reply()], soul_home)
    result = s.session(user="ada").turn_sync("Hi, I'm Ada. I build compilers.")
    assert provider.calls == 1
    assert result.reply == "Hello, Ada. Compilers, then — a noble way to suffer."
    assert result.steps["think"]["verb"] == "pondered"
    assert result.steps["user_check"]["result"] is True
    assert result.turn == 1
    assert [c.steps for c in result.trace.calls] == [("think", "reply", "user_check", "user_update")]


def test_a_true_check_updates_the_versioned_user_model(soul_home: Path) -> None:
    s, _ = claudius([claudius_reply()], soul_home)
    s.session(user="ada").turn_sync("I build compilers.")
    model = s.store.user_model("claudius", "ada")
    assert model is not None and model.text.startswith("# Ada") and model.note == "Learned that Ada builds compilers."


def test_a_false_check_gates_the_update_after_the_call(soul_home: Path) -> None:
    s, _ = claudius([claudius_reply(check="false")], soul_home)
    result = s.session(user="ada").turn_sync("Nice weather.")
    assert s.store.user_model("claudius", "ada") is None
    statuses = {st.step: st.status for st in result.trace.steps}
    assert statuses["user_update"] == "gated"


def test_every_3_asks_for_soul_state_only_on_the_third_turn(soul_home: Path) -> None:
    replies = [claudius_reply(check="false"), claudius_reply(check="false"), claudius_reply(check="false", state="currentTopic: compilers\nemotionalState: engaged\nbogus: 1")]
    s, provider = claudius(replies, soul_home)
    session = s.session(user="ada")
    for text in ("one", "two", "three"):
        session.turn_sync(text)
    systems = [r.messages[0].content for r in provider.requests]
    assert ["<soul_state_check>" in m for m in systems] == [False, False, True]
    snap = s.store.snapshot(session.id)
    assert snap.state["currentTopic"] == "compilers" and snap.state["emotionalState"] == "engaged"
    assert "bogus" not in snap.state
    # the new state shows in the next prompt, keys at their default omitted
    assert "## Soul State" not in systems[0]


def test_the_user_model_is_injected_on_the_first_turn_and_after_a_true_check(soul_home: Path) -> None:
    no_state = "<soul_state_check>false</soul_state_check>"  # turn 3 asks for it; the update is gated off
    replies = [claudius_reply(check="false"), claudius_reply(check="true"), claudius_reply(check="false") + no_state]
    s, provider = claudius(replies, soul_home)
    session = s.session(user="ada")
    for text in ("one", "two", "three"):
        session.turn_sync(text)
    systems = [r.messages[0].content for r in provider.requests]
    assert ["## User Model" in m for m in systems] == [True, False, True]


def test_a_session_resumes_by_id_prefix(soul_home: Path) -> None:
    s, _ = claudius([claudius_reply(), claudius_reply(check="false")], soul_home)
    first = s.session(user="ada")
    first.turn_sync("hello")
    again = s.session(first.id[:8])
    result = again.turn_sync("again")
    assert result.turn == 2 and again.id == first.id


def test_a_chained_turn_makes_one_call_per_step_and_the_subprocess_learns(soul_home: Path) -> None:
    provider = ScriptedProvider(SAMANTHA_TURN + SAMANTHA_LEARNS)
    s = soul.load("samantha", provider=provider, home=soul_home)
    result = s.session(user="bo").turn_sync("I'm Bo, I write compilers.")
    assert provider.calls == 5
    assert result.steps["decide"]["choice"] == "ask a question"
    assert result.reply == "Hi! What are you working on these days?"
    # the decision call saw the monologue; the reply call saw both
    assert "A new person!" in provider.requests[1].messages[0].content
    assert "ask a question" in provider.requests[2].messages[0].content
    model = s.store.user_model("samantha", "bo")
    assert model is not None and "Compilers." in model.text


def test_retry_reasks_with_the_parse_error_and_keeps_the_good_reply(soul_home: Path) -> None:
    s, provider = claudius(["I am just prose, no sections.", claudius_reply(check="false")], soul_home)
    result = s.session().turn_sync("hi")
    assert provider.calls == 2
    assert result.reply.startswith("Hello, Ada")
    second = provider.requests[1].messages
    assert second[-2].role == "assistant" and second[-2].content == "I am just prose, no sections."
    assert "<external_dialogue>" in second[-1].content and "missing" in second[-1].content
    assert result.trace.calls[0].attempts == 2


def test_after_the_retries_the_reply_falls_back_to_the_raw_text(soul_home: Path) -> None:
    s, provider = claudius(["Just <b>prose</b> here.", "Still prose."], soul_home)
    result = s.session().turn_sync("hi")
    assert provider.calls == 2
    assert result.reply == "Still prose."
    assert {st.step: st.status for st in result.trace.steps}["reply"] == "fallback"


def test_an_empty_reply_falls_back_to_the_seed_line(soul_home: Path) -> None:
    s, _ = claudius(["", "   "], soul_home)
    assert s.session().turn_sync("hi").reply == FALLBACK_REPLY


def test_running_out_of_scripted_replies_is_a_clear_error_and_stores_nothing(soul_home: Path) -> None:
    s, _ = claudius([], soul_home)
    session = s.session()
    with pytest.raises(ScriptExhausted, match="ran out: <list> has 0 replies"):
        session.turn_sync("hi")
    assert s.store.session(session.id).turns == 0
    assert s.store.messages(session.id) == []


class SlowProvider(Provider):
    """A real provider object whose calls take time, recording when each ran."""

    name = "slow"

    def __init__(self, replies: dict[str, str], delay: float) -> None:
        self.replies = replies
        self.delay = delay
        self.spans: list[tuple[float, float]] = []

    async def complete(self, request: Request) -> Completion:
        start = time.perf_counter()
        await asyncio.sleep(self.delay)
        self.spans.append((start, time.perf_counter()))
        tag = request.tags[0]
        return Completion(self.replies[tag], Usage())


def test_independent_units_of_a_layer_run_concurrently(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(fan_of_three("reply: {uses: external_dialogue, after: [a, b, c]}"))
    provider = SlowProvider({"mental_query": "<mental_query>true</mental_query>", "external_dialogue": "<external_dialogue>ok</external_dialogue>"}, 0.2)
    s = soul.load(path, provider=provider, home=soul_home)
    started = time.perf_counter()
    result = s.session().turn_sync("go")
    elapsed = time.perf_counter() - started
    assert result.reply == "ok"
    fan = sorted(provider.spans)[:3]
    assert max(start for start, _ in fan) < min(end for _, end in fan)  # all three overlapped
    assert elapsed < 0.2 * 4 - 0.1


class ScheduledProvider(Provider):
    """Answers each step's question after its own delay (so concurrent calls finish in the
    order the delays say), recording every request."""

    name = "scheduled"

    def __init__(self, delays: dict[str, float], answers: dict[str, str]) -> None:
        self.delays, self.answers = delays, answers
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        system = request.messages[0].content
        asked = next(q for q in self.delays if f"statement about the conversation, true or false: {q}" in system)
        await asyncio.sleep(self.delays[asked])
        tag = request.tags[0]
        return Completion(f"<{tag}>{self.answers.get(asked, 'true')}</{tag}>", Usage())


def test_this_turn_so_far_lists_concurrent_steps_in_plan_order_whatever_order_they_finish(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(fan_of_three("d: {uses: mental_query, after: [a, b, c], with: {query: d?}}"))
    provider = ScheduledProvider({"a?": 0.15, "b?": 0.1, "c?": 0.05, "d?": 0.0}, {"b?": "false"})
    s = soul.load(path, provider=provider, home=soul_home)
    result = s.session().turn_sync("go")
    assert [st.step for st in result.trace.steps][:3] == ["c", "b", "a"]  # finished last first
    last = provider.requests[-1].messages[0].content
    assert "## This Turn So Far\n- a: result: True\n- b: result: False\n- c: result: True\n" in last


def test_this_turn_so_far_shows_each_turns_own_outputs(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(
        "soul: chain\nversion: 1\nmode: chained\nsteps:\n"
        "  a: {uses: mental_query, with: {query: a?}}\n"
        "  b: {uses: mental_query, after: [a], with: {query: b?}}\n"
        "  c: {uses: mental_query, after: [b], with: {query: c?}}\n"
    )
    provider = ScheduledProvider({"a?": 0.0, "b?": 0.0, "c?": 0.0}, {})
    s = soul.load(path, provider=provider, home=soul_home)
    session = s.session()
    session.turn_sync("one")
    provider.answers = {"a?": "false"}  # the next turn's a answers otherwise: its lines must say so
    session.turn_sync("two")
    systems = [r.messages[0].content for r in provider.requests]
    assert "## This Turn So Far" not in systems[0] and "## This Turn So Far" not in systems[3]
    assert "## This Turn So Far\n- a: result: True\n\n" in systems[1]
    assert "## This Turn So Far\n- a: result: True\n- b: result: True\n\n" in systems[2]
    assert "## This Turn So Far\n- a: result: False\n\n" in systems[4]
    assert "## This Turn So Far\n- a: result: False\n- b: result: True\n\n" in systems[5]


class InstantProvider(Provider):
    """Answers true without ever waiting: each call is over before the next unit starts."""

    name = "instant"

    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        tag = request.tags[0]
        return Completion(f"<{tag}>true</{tag}>", Usage())


def test_the_units_of_a_layer_are_prompted_alike_however_fast_the_model_answers(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    # an instant model finishes a before b starts; a slow one does not: b's prompt must not differ
    path = write_blueprint(fan_of_three("d: {uses: mental_query, after: [a, b, c], with: {query: d?}}"))
    prompts = []
    for provider in (InstantProvider(), ScheduledProvider({"a?": 0.05, "b?": 0.05, "c?": 0.05, "d?": 0.05}, {})):
        soul.load(path, provider=provider, home=soul_home / provider.name).session().turn_sync("go")
        prompts.append([r.messages[0].content for r in provider.requests])
    assert prompts[0] == prompts[1]
    assert all("## This Turn So Far" not in p for p in prompts[0][:3])  # a, b and c see no sibling
    assert "- a: result: True\n- b: result: True\n- c: result: True" in prompts[0][3]


def test_a_fan_out_recorded_against_a_slow_model_replays(write_blueprint, soul_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from soul.providers.cassette import Cassette
    from soul.providers.replay import ReplayProvider, recording

    path = write_blueprint(fan_of_three("d: {uses: mental_query, after: [a, b, c], with: {query: d?}}"))
    tape = tmp_path / "fan.yaml"
    slow = ScheduledProvider({"a?": 0.05, "b?": 0.05, "c?": 0.05, "d?": 0.0}, {"b?": "false"})
    recorded = soul.load(path, provider=slow, home=soul_home / "rec", wrap=recording(tape)).session().turn_sync("go")
    replayed = soul.load(path, provider=ReplayProvider(Cassette.load(tape)), home=soul_home / "play").session().turn_sync("go")
    assert replayed.steps == recorded.steps == {"a": {"result": True}, "b": {"result": False}, "c": {"result": True},
                                                "d": {"result": True}}


class OneFailsProvider(Provider):
    """`a?` waits (long), `b?` fails at once: what becomes of a layer whose units part ways."""

    name = "one-fails"

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    async def complete(self, request: Request) -> Completion:
        system = request.messages[0].content
        if "true or false: b?" in system:
            raise ProviderError("b's model is down")
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            self.cancelled.append("a" if "true or false: a?" in system else "other")
            raise
        tag = request.tags[0]
        return Completion(f"<{tag}>true</{tag}>", Usage())


def test_a_unit_that_fails_cancels_the_units_of_its_layer_still_waiting(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(fan_of_three("d: {uses: mental_query, after: [a, b, c], with: {query: d?}}"))
    provider = OneFailsProvider()
    s = soul.load(path, provider=provider, home=soul_home)
    started = time.perf_counter()
    with pytest.raises(ProviderError, match="b's model is down"):
        s.session().turn_sync("go")
    assert time.perf_counter() - started < 2  # not after a's 5 s
    assert provider.cancelled == ["a"]  # a was waiting when b failed; c was never started


class FailingProvider(Provider):
    name = "failing"

    async def complete(self, request: Request) -> Completion:
        raise ProviderError("the model is down")

    async def stream(self, request: Request) -> AsyncIterator[Chunk]:
        raise ProviderError("the model is down")
        yield Chunk("")  # pragma: no cover


def test_a_provider_failure_leaves_the_session_as_it_was(soul_home: Path) -> None:
    good, _ = claudius([claudius_reply()], soul_home)
    session = good.session(user="ada")
    session.turn_sync("hello")
    before = good.store.snapshot(session.id)
    bad = soul.load("claudius", provider=FailingProvider(), home=soul_home)
    with pytest.raises(ProviderError, match="the model is down"):
        bad.session(session.id).turn_sync("again")
    after = bad.store.snapshot(session.id)
    assert after == before


def test_turn_sync_inside_a_running_loop_says_to_await(soul_home: Path) -> None:
    s, _ = claudius([claudius_reply()], soul_home)
    session = s.session()

    async def inside() -> None:
        with pytest.raises(RunError, match=r"use `await session\.turn"):
            session.turn_sync("hi")
        result = await session.turn("hi")
        assert result.reply.startswith("Hello")

    asyncio.run(inside())


def test_the_next_input_cancels_a_running_subprocess_and_it_writes_nothing(soul_home: Path) -> None:
    class Gate(Provider):
        """Answers the turn's steps; the subprocess's question hangs until cancelled."""

        name = "gate"

        def __init__(self) -> None:
            self.replies = list(SAMANTHA_TURN) * 2

        async def complete(self, request: Request) -> Completion:
            if "mental_query" in request.tags:
                await asyncio.sleep(30)
            return Completion(self.replies.pop(0), Usage())

    provider = Gate()
    s = soul.load("samantha", provider=provider, home=soul_home)
    session = s.session(user="bo")

    async def talk() -> None:
        await session.turn("first")
        await asyncio.sleep(0.05)
        assert session._background is not None and not session._background.done()
        await session.turn("second")  # cancels the hanging subprocess

    asyncio.run(talk())
    assert s.store.user_model("samantha", "bo") is None
    assert s.store.session(session.id).turns == 2


def test_a_template_reads_the_outputs_of_earlier_calls(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(
        "soul: t\nversion: 1\nmode: chained\nsteps:\n"
        "  think: {uses: internal_monologue}\n"
        "  reply: {uses: external_dialogue, after: [think], template: reply.j2}\n",
        **{"reply.j2": "You were thinking ({{ steps.think.verb }}): {{ steps.think.text }}\n"},
    )
    provider = ScriptedProvider(['<internal_monologue verb="mused">cats are great</internal_monologue>', "<external_dialogue>ok</external_dialogue>"])
    soul.load(path, provider=provider, home=soul_home).session().turn_sync("hi")
    assert "You were thinking (mused): cats are great" in provider.requests[1].messages[0].content


def test_a_template_including_one_that_reads_the_turn_is_rendered_each_turn(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    # a template that reads only `soul` and `params` is rendered once a soul (issue 26); what
    # it includes is read too: an include reading the turn made it stale from the second turn
    path = write_blueprint(
        "soul: t\nversion: 1\nsteps:\n  reply: {uses: external_dialogue, template: reply.j2}\n",
        **{"reply.j2": "{% include 'part.j2' %}\n", "part.j2": "Turn number {{ turn.number }}\n"},
    )
    provider = ScriptedProvider(["<external_dialogue>a</external_dialogue>", "<external_dialogue>b</external_dialogue>"])
    session = soul.load(path, provider=provider, home=soul_home).session()
    session.turn_sync("hi")
    session.turn_sync("again")
    assert "Turn number 1" in provider.requests[0].messages[0].content
    assert "Turn number 2" in provider.requests[1].messages[0].content


def test_a_subprocess_template_reads_the_turns_steps(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(
        "soul: t\nversion: 1\nsteps:\n  reply: {uses: external_dialogue}\n"
        "subprocesses:\n  reflect:\n    steps:\n      looked_back: {uses: internal_monologue, template: back.j2}\n",
        **{"back.j2": "You just said: {{ steps.reply.text }}\n"},
    )
    provider = ScriptedProvider(["<external_dialogue>Hello there</external_dialogue>", "<internal_monologue>fine</internal_monologue>"])
    soul.load(path, provider=provider, home=soul_home).session().turn_sync("hi")
    assert provider.calls == 2
    assert "You just said: Hello there" in provider.requests[1].messages[0].content
