"""The context window of any stored turn (issue 27, item 1): each part of each call with its
tokens, adding up to the call's input; the window, the budget and what was cut and why; the
same from `soul explain --turn N SESSION` and `--json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conversation_souls import converse, load, reply
from tool_souls import ANSWER, REPLY, tool_soul, xml_call

import soul
from soul.cli.main import main
from soul.providers import ScriptedProvider
from soul.runtime import call_window, turn_window
from soul.runtime.conversation import share_out


def spans_cover(call: Any) -> None:
    """The recorded spans cover every character of the builder's messages once, in order."""
    layout = call.window
    reach = [0] * layout["messages"]
    for _part, _label, msg, start, end in layout["spans"]:
        assert start == reach[msg]
        reach[msg] = end
    assert reach == [len(m.content) for m in call.messages[: layout["messages"]]]


def test_every_part_of_the_prompt_is_recorded_and_the_parts_add_up_to_the_calls_input(tmp_path: Path) -> None:
    s, _, _ = load(tmp_path, [reply(f"answer {i}") for i in range(6)], window=131072)
    results = converse(s.session(user="ada"), [f"message number {i}" for i in range(4)])
    call = results[3].trace.calls[0]
    spans_cover(call)
    stored = s.store.trace(results[3].session_id, 4)
    window = turn_window(stored)["calls"][0]
    assert window["input_tokens"] == call.input_tokens == window["reported_input_tokens"] > 0
    assert sum(x["tokens"] for x in window["sections"]) == call.input_tokens
    assert sum(window["parts"].values()) == call.input_tokens
    names = [(x["part"], x["label"]) for x in window["sections"]]
    assert names[0] == ("persona", "")
    assert ("response format", "") in names and ("chat template", "8 per message") in names
    assert [label for part, label in names if part == "history"] == [
        "turn 1 · user", "turn 1 · soul", "turn 2 · user", "turn 2 · soul", "turn 3 · user", "turn 3 · soul"]
    assert names[-2] == ("message", "")  # the current message last, then the template's overhead
    assert window["window"] == 131072 and window["budget"] == 131072 - window["reserve"] and window["used"] > 0
    assert window["requests"] == 1 and window["cut"] == []


def test_what_the_budget_cut_is_listed_with_why(tmp_path: Path) -> None:
    s, _, _ = load(tmp_path, [reply(f"r{i} " + "words " * 30) for i in range(12)], window=1800, reserve=200, limit=2)
    results = converse(s.session(user="ada"), [f"message {i} " + "talk " * 30 for i in range(10)])
    windows = [turn_window(s.store.trace(r.session_id, r.turn))["calls"][0] for r in results]
    cuts = [c for w in windows for c in w["cut"]]
    assert any(c["part"] == "history" and "over" in c["why"] for c in cuts), cuts
    for w, r in zip(windows, results, strict=True):
        assert w["input_tokens"] == r.trace.calls[0].input_tokens
        assert w["used"] <= w["budget"]


def test_a_reask_sends_the_prompt_twice_and_its_parts_still_add_up(tmp_path: Path) -> None:
    s, _, _ = load(tmp_path, ["no sections at all", reply("now properly")])
    result = converse(s.session(user="ada"), ["hello"])[0]
    call = result.trace.calls[0]
    assert call.attempts == 2
    window = call_window(s.store.trace(result.session_id, 1)["calls"][0])
    assert window["requests"] == 2
    asked = [x for x in window["sections"] if x["part"] == "re-ask"]
    assert [x["label"] for x in asked] == ["round 1 · assistant", "round 1 · user"] and all(x["sent"] == 1 for x in asked)
    assert next(x for x in window["sections"] if x["part"] == "persona")["sent"] == 2
    assert window["input_tokens"] == call.input_tokens


def test_tools_described_in_the_system_prompt_and_native_specs_are_parts_of_the_window(tmp_path: Path) -> None:
    path = tool_soul(tmp_path, module="tools_window_xml")
    with soul.load(path, provider=ScriptedProvider([xml_call("forecast", '{"city": "Oslo"}'), ANSWER, REPLY]), home=tmp_path / "h1") as s:
        result = s.session().turn_sync("weather in Oslo?")
        window = turn_window(s.store.trace(result.session_id, 1))
    first = window["calls"][0]
    assert ("tools", "described in the system prompt") in [(x["part"], x["label"]) for x in first["sections"]]
    assert "tool round" in first["parts"] and first["requests"] == 2
    assert first["input_tokens"] == result.trace.calls[0].input_tokens

    path = tool_soul(tmp_path, module="tools_window_native")
    path.write_text(path.read_text().replace("  lookup: {uses: tool}\n  reply: {uses: external_dialogue, after: [lookup]}",
                                             "  reply: {uses: external_dialogue, tools: [forecast]}"))
    native = ScriptedProvider([{"tool_calls": [{"name": "forecast", "arguments": {"city": "Oslo"}}]}, REPLY])
    with soul.load(path, provider=native, home=tmp_path / "h2") as s:
        result = s.session().turn_sync("weather in Oslo?")
        window = turn_window(s.store.trace(result.session_id, 1))
    labels = [(x["part"], x["label"]) for x in window["calls"][0]["sections"]]
    assert ("tools", "tool specs (native)") in labels and ("tool round", "round 1 · tool") in labels


def test_a_trace_stored_before_layouts_shows_one_part_per_message() -> None:
    call = {"unit": 0, "model": "m", "steps": ["reply"], "input_tokens": 100, "output_tokens": 5,
            "messages": [{"role": "system", "content": "You are x." * 20}, {"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "hello"}, {"role": "user", "content": "## Current Message\nyo"}],
            "budget": {"window": 4096, "reserve": 512, "counter": "x", "used": 90}, "cut": [], "reasks": []}
    window = call_window(call)
    assert [x["part"] for x in window["sections"]] == ["system prompt", "history", "history", "message", "chat template"]
    assert window["input_tokens"] == 100 and window["budget"] == 3584


@pytest.mark.parametrize("layout", [
    {"spans": [["persona", "", 0, 5, 2]], "messages": 1},  # backwards
    {"spans": [["persona", "", 7, 0, 3]], "messages": 1},  # no such message
    {"spans": "junk", "messages": 1},
    {"spans": [["persona", "", 0, 0, 10**9]], "messages": 1},  # past the text
    {"messages": 99},
])
def test_a_damaged_layout_falls_back_to_one_part_per_message(layout: dict[str, Any]) -> None:
    call = {"messages": [{"role": "system", "content": "abc def"}, {"role": "user", "content": "hi"}], "window": layout,
            "input_tokens": 0}
    window = call_window(call)
    assert [x["part"] for x in window["sections"]] == ["system prompt", "message", "chat template"]
    assert window["input_tokens"] == sum(x["counted"] * x["sent"] for x in window["sections"][:2]) + 16


@pytest.mark.parametrize("total,weights", [(10, [1, 1, 1]), (1889, [336, 115, 958, 6, 44]), (7, [0, 0, 5]), (0, [3, 4])])
def test_sharing_out_keeps_the_total_and_the_proportions(total: int, weights: list[int]) -> None:
    shares = share_out(total, weights)
    assert sum(shares) == total
    whole = sum(weights)
    assert all(abs(s - total * w / whole) < 1 for s, w in zip(shares, weights, strict=True))


def test_soul_explain_turn_prints_a_stored_turns_window_and_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = Path(__file__).resolve().parents[2] / "examples" / "claudius-hello.yaml"
    assert main(["run", "claudius", "--script", str(script), "-m", "Hello"]) == 0
    capsys.readouterr()
    from soul.store import SessionStore

    with SessionStore.open() as store:
        sid = store.sessions("claudius")[0].id
    assert main(["explain", "--turn", "1", sid[:8]]) == 0
    text = capsys.readouterr().out
    assert f"session {sid} · soul claudius · turn 1 (message) · 1 call" in text
    assert "persona" in text and "response format" in text and "cut: nothing" in text
    assert main(["explain", "--turn", "1", sid, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    call = data["calls"][0]
    assert data["session"] == sid and sum(s["tokens"] for s in call["sections"]) == call["input_tokens"] > 0
    assert main(["explain", "--turn", "9", sid]) != 0
    assert "has 1 turn: there is no turn 9" in capsys.readouterr().err
    assert main(["explain", "claudius"]) != 0
    assert "needs -m MESSAGE" in capsys.readouterr().err


CHAINED = """\
soul: chained
version: 1
mode: chained
steps:
  a: {uses: mental_query, with: {query: Is the sky blue?}}
  b: {uses: mental_query, after: [a], with: {query: Is water wet?}}
  c: {uses: mental_query, after: [b], with: {query: Is fire hot?}}
"""


def test_the_calls_of_a_chained_turn_each_record_spans_covering_their_own_prompt(tmp_path: Path) -> None:
    # a chained turn's calls share the turn's rows; each adds "this turn so far" and its format
    (tmp_path / "chained.yaml").write_text(CHAINED)
    replies = ["<mental_query>true</mental_query>"] * 6
    s = soul.load(tmp_path / "chained.yaml", provider=ScriptedProvider(replies), home=tmp_path / "home")
    session = s.session(user="ada")
    session.turn_sync("hello")
    second = session.turn_sync("and again")
    assert len(second.trace.calls) == 3
    for call in second.trace.calls:
        spans_cover(call)
    parts = [[span[0] for span in call.window["spans"] if span[2] == 0] for call in second.trace.calls]
    assert "this turn so far" not in parts[0] and parts[1][-2:] == ["this turn so far", "response format"]
    s.close()


def _layout_by_pieces(system: Any, history: list[Any], labels: list[str], message: Any) -> dict[str, Any]:
    """The layout as `parts.Layout` records it, message by message (what `_layout` wrote
    before it wrote the history's rows directly)."""
    from soul.runtime.conversation import parts

    if history and history[-1].role == "user":
        last = history.pop()
        message = parts.join((parts.piece(parts.HISTORY, last.content, labels.pop()), message))
    layout = parts.Layout()
    layout.add(system)
    for m, label in zip(history, labels, strict=True):
        layout.add(parts.piece(parts.HISTORY, m.content, label))
    layout.add(message)
    return {**layout.to_dict(), "user": message.text}


def test_a_prompts_history_rows_are_the_layout_its_pieces_make() -> None:
    import random

    from soul.providers import Message
    from soul.runtime.conversation import parts
    from soul.runtime.turn.prompting.fitting import _layout

    rng = random.Random(26)
    impulses = parts.Piece("ab", ((parts.MESSAGE, "", 0, 1), (parts.IMPULSES, "S_loud", 1, 2)))
    for _ in range(500):
        history = [Message(rng.choice(["user", "assistant"]), rng.choice(["", "a", "hello there"])) for _ in range(rng.randint(0, 6))]
        labels = [f"turn {i} · x" for i in range(len(history))]
        system = rng.choice([parts.EMPTY, parts.join((parts.piece(parts.PERSONA, "p"), parts.piece(parts.STEERING, "s")))])
        message = rng.choice([parts.piece(parts.MESSAGE, "hi"), impulses])
        assert _layout(system, list(history), list(labels), message) == _layout_by_pieces(system, list(history), list(labels), message)
