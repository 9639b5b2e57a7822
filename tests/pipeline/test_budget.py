"""A token budget per call (issue 15.2): every slot knows its window, prompts are fitted into
it by priority, what is cut is traced and explained, and fixed parts that cannot fit are a
typed error that says how to fix it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from conversation_souls import converse, load, reply, write_soul
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.compiler import load_valid
from soul.providers import ScriptedProvider, context_window, reply_tokens
from soul.runtime.conversation.budget import BudgetExceeded, count_tokens, estimate
from soul.runtime.dry_run import explain, render


def test_a_window_comes_from_the_slot_the_provider_the_table_or_a_safe_default() -> None:
    assert context_window("anthropic/claude-sonnet-4-5") == 200_000
    assert context_window("openai/gpt-4o-mini") == 128_000
    assert context_window("local") == 4096 and context_window("local", {"n_ctx": 2048}) == 2048
    assert context_window("openai/some-new-model") == 8192  # unknown: small, never an overrun
    assert context_window("anthropic/claude-haiku-4-5", {"context_window": 1000}) == 1000
    scripted = ScriptedProvider([])
    assert context_window("local", {}, scripted) == 131072  # canned replies: generous
    scripted.context_window = 900
    assert context_window("local", {}, scripted) == 900
    assert reply_tokens("local", {}, 4096) == 512 and reply_tokens("openai/x", {"max_tokens": 3000}, 4096) == 2048


@pytest.mark.parametrize("text", [
    "Plain English prose, the kind a user types when they talk about their day and their cat Tom.",
    "def f(x):\n    return {k: v for k, v in x.items() if v is not None}  # code, symbols",
    "1234567890 3.14159 2026-11-23 0xdeadbeef",
    "日本語のテキストと한국어 텍스트, ελληνικά, emoji 🐈🐈🐈",
    "a a a a a a a a a a a a a a a a",
    "<<<>>>&&&;;;```~~~|||",
])
def test_the_estimate_never_counts_fewer_tokens_than_the_bundled_tokenizer(text: str) -> None:
    assert estimate(text) >= count_tokens(text)


def _estimate_piece_by_piece(text: str) -> int:
    """The estimate as its rules read (the loop it was until a turn counted its texts with one
    `findall`): each piece in turn, a letter run one token per 3 letters."""
    total = 0
    for match in re.finditer(r"[ \t]?[A-Za-z]+|\s+|.", text, re.DOTALL):
        piece = match.group()
        if piece[-1].isascii() and piece[-1].isalpha():
            total += math.ceil(len(piece.lstrip(" \t")) / 3)
        elif piece.isascii():
            total += 1
        else:
            total += len(piece.encode("utf-8", "surrogatepass"))
    return math.ceil(total * 1.1)


@pytest.mark.parametrize("text", [
    "", " ", "a", " a", "\ta", "  a", "\na", " \u00a0a", "\u00a0 abcd", "abcdefg hij\tk  lmnop\n\nq",
    "x = f(12, 'ab') # c\r\n", "caf\u00e9 na\u00efve \ud83d \U0001f408cat", "\x1c\x1d a\x0bb\x0cc",
])
@given(extra=st.text(alphabet=st.sampled_from("aZ \t\n\r\x0b\x1f\u00a0\u2003.7<&\u00e9\U0001f408\ud83d"), max_size=40))
@settings(max_examples=60, deadline=None)
def test_the_estimate_counts_as_its_rules_read_piece_by_piece(text: str, extra: str) -> None:
    for sample in (text, extra, text + extra, extra + text):
        assert estimate(sample) == _estimate_piece_by_piece(sample), repr(sample)


def test_explain_shows_each_calls_budget(tmp_path: Path) -> None:
    plan_path = write_soul(tmp_path, window=8000, reserve=300)
    from soul.compiler import compile_blueprint

    plan = compile_blueprint(load_valid(plan_path))
    calls = explain(plan, "hello")
    assert calls[0].budget is not None and calls[0].budget["window"] == 8000 and calls[0].budget["reserve"] == 300
    text = render(plan, "hello", calls)
    assert "─── budget: window 8000 tokens, 300 kept for the reply," in text


def test_fixed_parts_over_the_window_are_a_typed_error_naming_them_and_the_fix(tmp_path: Path) -> None:
    s, _, _ = load(tmp_path, [reply("never")], window=400, reserve=200)
    with pytest.raises(BudgetExceeded) as caught:
        converse(s.session(user="ada"), ["hello"])
    message = str(caught.value)
    assert "response format" in message and "window of 400 tokens minus 200 kept for the reply" in message
    assert "context_window" in message and "think, reply on main" in message


def test_a_300_turn_conversation_fits_every_prompt_folds_its_history_and_keeps_turn_3(tmp_path: Path) -> None:
    window, reserve = 1800, 200
    messages = [f"Message {i}: let us talk about parsers, item {i}." for i in range(1, 301)]
    messages[2] = "By the way, my cat is called Tiberius."
    main = [reply(f"Reply {i}: noted, and here is a thought about grammars.", thought=f"thinking about turn {i}") for i in range(1, 301)]
    # the summary slot's model folds what it is given; its first summary keeps the cat, as a model would
    cheap = ["<summary>Ada's cat is called Tiberius; they talk about parsers.</summary>"] * 100
    s, turns, summaries = load(tmp_path, main, cheap, window=window, reserve=reserve)
    results = converse(s.session(user="ada"), messages)
    from soul.runtime.conversation.budget import ESTIMATE, Counter

    counter = Counter(ESTIMATE, False)
    assert all(counter.messages([m.content for m in r.messages]) <= window - reserve for r in turns.requests)
    assert summaries.calls >= 20  # the history was folded again and again as it grew
    assert "my cat is called Tiberius" in summaries.requests[0].messages[1].content  # turn 3 went into the summary
    last = turns.requests[-1].messages
    assert "## Earlier in This Conversation" in last[0].content and "Tiberius" in last[0].content
    assert all("Tiberius" not in m.content for m in last[1:])  # reached through the summary alone
    assert any(c["part"] == "history" for r in results[20:] for c in r.trace.calls[0].cut)
    assert max(len(r.messages) for r in turns.requests) < 30  # bounded, however long the talk


def test_when_the_summary_call_fails_a_digest_keeps_the_oldest_facts(tmp_path: Path) -> None:
    messages = [f"m{i}" for i in range(1, 41)]
    messages[2] = "my cat is called Tiberius"
    s, turns, summaries = load(tmp_path, [reply(f"r{i}") for i in range(40)], [], window=1800, reserve=200)
    session = s.session(user="ada")
    converse(session, messages)
    assert summaries.calls == 0  # the script ran out at once: every fold is a digest
    assert "Tiberius" in turns.requests[-1].messages[0].content
    rows = s.store._conn.execute("SELECT layer, digest FROM context_summaries").fetchall()
    assert rows and all(r == ("conversation", 1) for r in rows)


def test_a_prompt_that_plainly_fits_is_written_as_the_cutting_path_writes_it(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    # the plainly-fits path (no walk of the history) must say exactly what the full fit would:
    # messages, budget report and layout, for every mix of this-turn text and response format
    import asyncio

    import soul
    from soul.runtime.turn import ScopeRunner, TurnState, context_for
    from soul.runtime.turn.prompting import fitting

    path = write_blueprint("soul: chain\nversion: 1\nmode: chained\nsteps:\n"
                           "  a: {uses: mental_query, with: {query: a?}}\n"
                           "  b: {uses: mental_query, after: [a], with: {query: b?}}\n")
    s = soul.load(path, provider=ScriptedProvider(["<mental_query>true</mental_query>"] * 8), home=soul_home)
    session = s.session(user="ada")
    for text in ("one", "two"):
        session.turn_sync(text)
    snapshot = s.store.snapshot(session.id)
    fitted: list[tuple[fitting.Fitter, tuple]] = []  # type: ignore[type-arg]
    real = fitting.Fitter.fit

    def seen(self: fitting.Fitter, *args: object) -> fitting.Prompt:
        fitted.append((self, args))
        return real(self, *args)  # type: ignore[arg-type]

    fitting.Fitter.fit = seen  # type: ignore[method-assign]
    try:
        ts = TurnState(context_for(s.plan, snapshot, "three", "message"), {})
        asyncio.run(ScopeRunner(s.plan, s.plan.turn, s.services, None).run(ts))
    finally:
        fitting.Fitter.fit = real  # type: ignore[method-assign]
    assert len(fitted) == 2
    for fitter, (turn, this_turn, form, budget, where) in fitted:
        for own in (this_turn, "", "## This Turn So Far\n- x: result: True"):
            for asked in (form, ""):
                fast = fitter.fit(turn, own, asked, budget, where)
                costs = turn.costs(budget.counter, fitter.count)
                t, f = fitter.count(budget.counter, own), fitter.count(budget.counter, asked)
                full = fitter._cutting(turn, own, asked, budget, where, costs, t, f)
                assert [(m.role, m.content) for m in fast.messages] == [(m.role, m.content) for m in full.messages]
                assert fast.budget == full.budget
                assert fast.layout == full.layout
                assert not fast.cut and not full.cut
