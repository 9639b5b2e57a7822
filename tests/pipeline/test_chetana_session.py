"""Chetana in a soul: state kept with the session, steps reported, corrections, steering."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from souls import claudius_reply

import soul
from soul.cli.main import main
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges.chetana import is_correction

NO_STATE = "<soul_state_check>false</soul_state_check>"


@pytest.mark.parametrize(
    "text",
    [
        "No, I meant the other file.",
        "no i meant python 3.11",
        "That's wrong.",
        "that is not what I asked",
        "Not what I meant at all",
        "You misunderstood me",
        "Actually, I said Tuesday",
        "I didn't mean that",
        "Wrong, it is 42",
        "Hmm. No, that's not right",
    ],
)
def test_corrections_are_detected(text: str) -> None:
    assert is_correction(text)


@pytest.mark.parametrize(
    "text",
    ["Hello!", "No worries, take your time", "Is that wrong?", "I know what I meant", "The wrongdoer was caught", "", "nothing to add"],
)
def test_ordinary_messages_are_not_corrections(text: str) -> None:
    assert not is_correction(text)


def test_the_controller_lives_with_the_session(soul_home: Path) -> None:
    replies = [claudius_reply(check="false"), claudius_reply(check="false"), claudius_reply(check="false") + NO_STATE]
    s = soul.load("claudius", provider=ScriptedProvider(replies), home=soul_home)
    session = s.session(user="ada")
    session.turn_sync("Let's fix the parser and write a test for it.")
    state = s.store.snapshot(session.id).chetana
    assert state is not None and state["turn"] == 1
    assert any("parser" in i["goal"] for i in state["intentions"])
    session.turn_sync("The parser tests pass now.")
    session.turn_sync("Great.")
    state = s.store.snapshot(session.id).chetana
    assert state["turn"] == 3
    # every step that ran was reported as a tool execution
    tools = {row["tool"] for row in soul_report(s, session.id)["self"]["mastery"]}
    assert {"think", "reply", "user_check"} <= tools


def test_a_steps_outputs_advance_the_goal_they_speak_of(soul_home: Path) -> None:
    replies = [claudius_reply("Fixing the parser before Friday, then.", check="false"),
               claudius_reply("Lovely weather.", check="false")]
    s = soul.load("claudius", provider=ScriptedProvider(replies), home=soul_home)
    session = s.session(user="ada")
    session.turn_sync("I need to fix the parser before Friday.")  # the goal, then a reply speaking of it
    progress = [i["progress"] for i in s.store.snapshot(session.id).chetana["intentions"]]
    assert progress and progress[0] > 0.0
    session.turn_sync("How are you?")
    assert [i["progress"] for i in s.store.snapshot(session.id).chetana["intentions"]] == progress


def soul_report(s: soul.Soul, session_id: str) -> dict:  # type: ignore[type-arg]
    from soul.runtime.bridges.chetana import session_report

    return session_report(s.store, session_id).to_dict()


def test_templates_and_gates_see_chetana(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(
        "soul: c\nversion: 1\nchetana: {}\nsteps:\n"
        "  feel: {uses: chetana.context}\n"
        "  reply: {uses: external_dialogue, after: [feel], template: reply.j2, when: \"chetana.affect.frustration < 0.7\"}\n",
        **{"reply.j2": "Frustration {{ '%.2f' % chetana.affect.frustration }}; focus: {{ steps.feel.focus | join(', ') }}\n"},
    )
    provider = ScriptedProvider(["<external_dialogue>ok</external_dialogue>"])
    s = soul.load(path, provider=provider, home=soul_home)
    result = s.session().turn_sync("Please refactor the tokenizer module")
    assert result.reply == "ok"
    system = provider.requests[0].messages[0].content
    assert "Frustration 0.00; focus: " in system and "tokenizer" in system
    assert "tokenizer" in result.steps["feel"]["focus"]


def test_failures_and_corrections_raise_frustration_until_steering_appears(soul_home: Path) -> None:
    garbage = "no sections at all"
    turns = 6
    replies = [garbage, garbage] * turns
    provider = ScriptedProvider(replies)
    s = soul.load("claudius", provider=provider, home=soul_home)
    session = s.session(user="ada")
    for _ in range(turns):
        session.turn_sync("No, that's wrong. Try again.")
    systems = [r.messages[0].content for r in provider.requests]
    assert "## Steering" not in systems[0]
    assert any("Consider a simpler approach — frustration is high" in m for m in systems)
    trace = s.store.trace(session.id, turns)
    log = (soul_home / "logs" / session.id / "events.jsonl").read_text()
    assert "user_correction" in log and "frustrated" in log
    assert isinstance(trace.get("events"), list)


def test_soul_chetana_prints_the_report(soul_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply(check="false")]), home=soul_home)
    session = s.session(user="ada")
    session.turn_sync("Let's build a compiler.")
    assert main(["chetana", session.id[:8]]) == 0
    out = capsys.readouterr().out
    assert "Bhava" in out and "Frustration" in out
    assert main(["chetana", session.id, "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"affect", "focus", "self"}


def test_soul_chetana_on_a_soul_without_it_says_so(soul_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from souls import SAMANTHA_LEARNS, SAMANTHA_TURN

    s = soul.load("samantha", provider=ScriptedProvider(SAMANTHA_TURN + SAMANTHA_LEARNS), home=soul_home)
    session = s.session()
    session.turn_sync("hi")
    assert main(["chetana", session.id]) == 1
    assert "has no Chetana state" in capsys.readouterr().err


def test_a_correction_raises_frustration_in_this_turns_prompt(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    """The user's correction is felt when it is read, so the reply it asks for is written
    with it (before, it showed only in the next turn's prompt)."""
    path = write_blueprint(
        "soul: c\nversion: 1\nchetana: {}\nsteps:\n"
        "  reply: {uses: external_dialogue, template: reply.j2}\n",
        **{"reply.j2": "Frustration {{ '%.2f' % chetana.affect.frustration }}; correction {{ chetana.correction }}\n"},
    )
    provider = ScriptedProvider(["<external_dialogue>ok</external_dialogue>"] * 3)
    s = soul.load(path, provider=provider, home=soul_home)
    session = s.session()
    session.turn_sync("Please refactor the tokenizer module")
    session.turn_sync("No, that's wrong. I meant the lexer.")
    session.turn_sync("Thanks, go on.")
    systems = [r.messages[0].content for r in provider.requests]
    assert "Frustration 0.00; correction False" in systems[0]
    assert "Frustration 0.25; correction True" in systems[1]  # this turn's prompt, at once
    assert "correction False" in systems[2]
    state = s.store.snapshot(session.id).chetana
    assert state is not None
    log = (soul_home / "logs" / session.id / "events.jsonl").read_text()
    assert log.count("user_correction") == 1


@pytest.mark.parametrize("data", [
    {"tool": "recall", "calibration": 1.0, "velocity": 0.0, "turns": 3, "ok": True, "gate": None},
    {"odd": float("nan"), "big": 10**30, "text": "\udc80 é", "zero": -0.0},
    {"pair": (1, 2)}, {1: "key"}, {"nested": {"b": 1}}, {"when": Path("x")},
    {"concepts": ["parser", "lexer"], "previous": ("tests", None, 1.5), "empty": []},
    {"mixed": [1, {"x": 2}]}, {"deep": [[1]]}, {"odd": [float("inf"), "\udc80"]}, {"when": [Path("x")]},
])
def test_an_event_is_stored_as_it_reads_back_from_json(data: dict) -> None:
    # Plain scalar events are copied rather than encoded and decoded (issue 26): what is
    # stored must still be exactly what a JSON round trip gives, types included.
    import json

    from soul.runtime.bridges.chetana import _json_safe

    stored, expected = _json_safe(data), json.loads(json.dumps(data, default=str))
    assert json.dumps(stored) == json.dumps(expected)
    assert [(k, type(v)) for k, v in stored.items()] == [(k, type(v)) for k, v in expected.items()]


TALK = [
    "Let's fix the parser and write a test for it.",
    "No, that's wrong. Try again.",
    "The parser tests pass now.",
    "Great. Now I want to add a cache to the lexer.",
    "Actually, I said the lexer, not the parser.",
    "Thanks, that works.",
]


def _claudius_replies(turns: int) -> list[str]:
    # the state check runs on every 3rd turn (claudius.yaml: every: 3)
    return [claudius_reply(check="false") + (NO_STATE if (i + 1) % 3 == 0 else "") for i in range(turns)]


def _count_restores(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from soul.engines.chetana import ChetanaController

    restores = [0]
    restore = ChetanaController.deserialize.__func__  # type: ignore[attr-defined]

    def counted(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        restores[0] += 1
        return restore(cls, *args, **kwargs)

    monkeypatch.setattr(ChetanaController, "deserialize", classmethod(counted))
    return restores


def _timeless(data: object) -> object:
    """A stored state without its measured latencies (each run times its steps afresh)."""
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "avg_latency"}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data


def test_a_session_goes_on_with_its_controller_exactly_as_a_restore_would(soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a Session keeps the controller its last turn ended with (Cognition.keep) and goes on with
    # it when the stored state is the one it wrote; a new Session object on the same session
    # keeps nothing and restores every turn: both store the same states and see the same prompts
    restores = _count_restores(monkeypatch)

    def talk(reopen: bool) -> tuple[list[object], list[str], int]:
        restores[0] = 0
        provider = ScriptedProvider(_claudius_replies(len(TALK)))
        s = soul.load("claudius", provider=provider, home=soul_home / ("reopened" if reopen else "kept"))
        session = s.session(user="ada")
        states = []
        for text in TALK:
            if reopen:
                session = s.session(session.id, user="ada")
            session.turn_sync(text)
            states.append(_timeless(s.store.snapshot(session.id).chetana))
        prompts = [r.messages[0].content.replace(session.id, "<session>") for r in provider.requests]
        return states, prompts, restores[0]

    kept_states, kept_prompts, kept_restores = talk(reopen=False)
    states, prompts, restored = talk(reopen=True)
    assert (kept_restores, restored) == (0, len(TALK) - 1)  # the first turn has no state to restore
    assert kept_states == states
    assert kept_prompts == prompts
    assert kept_states[-1]["turn"] == len(TALK)  # type: ignore[index]
    assert any(state["affect"]["frustration"] > 0 for state in kept_states)  # type: ignore[index]  # the corrections were felt


def test_a_state_another_writer_stored_is_restored_not_run_over(soul_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    restores = _count_restores(monkeypatch)
    s = soul.load("claudius", provider=ScriptedProvider(_claudius_replies(3)), home=soul_home)
    first = s.session(user="ada")
    first.turn_sync(TALK[0])
    s.session(first.id, user="ada").turn_sync(TALK[1])  # another Session object commits a turn
    first.turn_sync(TALK[2])  # its kept controller is turn 1's: the stored state (turn 2's) wins
    assert restores[0] == 2
    assert s.store.snapshot(first.id).chetana["turn"] == 3


@given(st.lists(st.sampled_from([
    "no", "No", "NOPE", "nah", ",", ".", "!", " ", "  ", "\n", "-", "I", "i", "meant", "said", "that's", "thats", "that", "this", "it",
    "is", "not", "what", "right", "correct", "wrong", "Wrong", "incorrect", "you", "misunderstood", "misread", "got", "are", "'re",
    "didn't", "did", "mean", "say", "ask", "actually", "Actually,", "the", "know", "note", "ſ", "ı", "İ", "é", "misſread", "dıd",
]), max_size=14))
@settings(max_examples=400, deadline=None)
def test_a_correction_is_told_as_its_search_alone_tells_it(words: list[str]) -> None:
    from soul.runtime.bridges.chetana import _CORRECTION

    for text in (" ".join(words), "".join(words)):
        assert is_correction(text) == (bool(text) and _CORRECTION.search(text) is not None), repr(text)
