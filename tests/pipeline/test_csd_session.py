"""AgentCSD end to end on scripted models: the subconscious cycles beside the conversation,
its mood reaches the next turn's system prompt, its impulses start spontaneous turns, and
nothing quiet ever reaches the user."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import soul
from soul.language.finding import builtin_folder
from soul.runtime.events import CycleFinished, ImpulseQueued, LoopStatus, Reply, Token, TriggerFired

BUILTIN = builtin_folder()


def sub(mood: str = "", criteria: str = "", loud: str = "", quiet: str = "", trigger: bool = False) -> str:
    return (f"<M_AND_C><mood>{mood}</mood><criteria>{criteria}</criteria></M_AND_C>"
            f"<S_loud>{loud}</S_loud><S_quiet>{quiet}</S_quiet><trigger>{str(trigger).lower()}</trigger>")


def con(loud: str, quiet: str = "a private thought") -> str:
    return f"<ID_quiet>{quiet}</ID_quiet><ID_loud>{loud}</ID_loud>"


Make = Callable[..., Any]


@pytest.fixture
def make(tmp_path: Path, soul_home: Path) -> Make:
    """A csd soul in a folder of its own, each slot on its own scripted replies."""

    def build(conscious: list[str], subconscious: list[str], **process: Any) -> Any:
        folder = tmp_path / "csd"
        folder.mkdir(exist_ok=True)
        for name in ("csd.md", "csd_core.md"):
            shutil.copy(BUILTIN / name, folder / name)
        data = yaml.safe_load((BUILTIN / "csd.yaml").read_text())
        data["models"] = {"conscious": "scripted:conscious.yaml", "subconscious": "scripted:sub.yaml"}
        triggers = process.pop("triggers", None)
        data["processes"]["subconscious"].update(process)
        if triggers is not None:
            data["triggers"] = triggers
        (folder / "csd.yaml").write_text(yaml.safe_dump(data))
        (folder / "conscious.yaml").write_text(json.dumps(conscious))
        (folder / "sub.yaml").write_text(json.dumps(subconscious))
        return soul.load(folder / "csd.yaml", home=soul_home)

    return build


def requests(s: Any, slot: str) -> list[Any]:
    return s.provider_for(slot)[0].requests


async def run(session: Any, messages: list[str], cycles: int) -> list[Any]:
    events: list[Any] = []
    session.subscribe(events.append)
    for text in messages:
        async for event in session.stream(text):
            events.append(event)
    await session.start(cycles=cycles)
    await session.idle()
    await session.close()
    return events


def test_mood_from_a_cycle_is_in_the_next_turns_system_prompt(make: Make) -> None:
    s = make([con("Hello!"), con("Welcome back.")], [sub("calm", "be brief")], loop="after_turn")

    async def go() -> None:
        session = s.session()
        await session.start(cycles=1)
        await session.turn("hi")  # cycle 1 runs after this turn
        await session.idle()
        await session.turn("how are you?")
        await session.close()

    asyncio.run(go())
    first, second = (r.messages[0].content for r in requests(s, "conscious"))
    assert "## Mood and Criteria" not in first
    assert "- mood: calm\n- criteria: be brief" in second
    cycle = requests(s, "subconscious")[0].messages[1].content
    assert "<ED_user>\nhi\n</ED_user>" in cycle and "<ED_agent>\nHello!\n</ED_agent>" in cycle


def test_a_trigger_starts_a_spontaneous_turn_and_quiet_text_never_reaches_the_user(make: Make, soul_home: Path) -> None:
    s = make([con("Hello!", "SECRET-ID-1"), con("How was the trip?", "SECRET-ID-2")],
             [sub("calm", "be brief", quiet="SECRET-S-1"), sub(loud="ask about the trip", quiet="SECRET-S-2", trigger=True), sub()])
    session = s.session()
    events = asyncio.run(run(session, ["hi, back from a trip"], cycles=3))
    replies = [e for e in events if isinstance(e, Reply)]
    assert [(r.text, r.spontaneous) for r in replies] == [("Hello!", False), ("How was the trip?", True)]
    fired = [e for e in events if isinstance(e, TriggerFired)]
    assert fired == [TriggerFired("speak_up", "trigger", ("ask about the trip",))]
    shown = " ".join(e.text for e in events if isinstance(e, Reply | Token))
    assert "SECRET" not in shown
    spontaneous = requests(s, "conscious")[1].messages[-1].content
    assert "<S_loud>\n- ask about the trip\n</S_loud>" in spontaneous and "SECRET-ID-1" in spontaneous
    db = sqlite3.connect(soul_home / "soul.db")
    kinds = [r[0] for r in db.execute("SELECT kind FROM commits WHERE session_id = ? ORDER BY id", (session.id,))]
    assert kinds.count("cycle") == 3 and kinds.count("spontaneous") == 1
    external = [r[0] for r in db.execute("SELECT content FROM messages WHERE layer = 'external'")]
    assert not any("SECRET" in text for text in external)


def test_an_s_loud_firing_that_finds_its_impulses_taken_by_a_user_turn_says_nothing(make: Make, soul_home: Path) -> None:
    # A trigger's turn waits for the turn lock; a user turn ahead of it drains the impulses.
    # What fires then finds none: it runs no turn (an idle or schedule firing still would).
    s = make([con("Sure, about that trip...")], [sub(loud="ask about the trip")])

    async def go() -> tuple[Any, list[Any]]:
        session = s.session()
        events: list[Any] = []
        session.subscribe(events.append)
        await session.start(cycles=1)
        while not session.mind.pending:
            await asyncio.sleep(0.01)
        await session.turn("anything new?")  # drains "ask about the trip"
        fired = await session._fire("speak_up", "trigger")  # what a waiting trigger then runs
        await session.idle()
        await session.close()
        return fired, events

    fired, events = asyncio.run(go())
    assert fired is None
    assert not any(isinstance(e, TriggerFired) for e in events)
    db = sqlite3.connect(soul_home / "soul.db")
    assert [r[0] for r in db.execute("SELECT kind FROM commits WHERE kind != 'cycle'")] == ["message"]


def test_a_csd_turn_without_impulses_or_quiet_history_shows_no_empty_blocks(make: Make) -> None:
    # small models copied the placeholders ("(no impulse from the subconscious)") into replies
    s = make([con("Hello!")], [sub()])
    asyncio.run(s.session().turn("hi"))
    message = requests(s, "conscious")[0].messages[-1].content
    assert "<S_loud>" not in message and "<ID_quiet_history>" not in message
    assert "no impulse" not in message and "(empty)" not in message


def test_impulses_batch_by_count_and_by_delay(make: Make) -> None:
    triggers = {"speak_up": {"kind": "s_loud", "source": "subconscious.impulse", "batch_seconds": 0.3, "batch_max": 2,
                             "unanswered_max": 2}}  # two spontaneous replies with no user message
    s = make([con("two at once"), con("one after a while")],
             [sub(loud="first"), sub(loud="second"), sub(loud="third")], triggers=triggers)
    events = asyncio.run(run(s.session(), [], cycles=3))
    fired = [e for e in events if isinstance(e, TriggerFired)]
    assert [(f.reason, f.impulses) for f in fired] == [("batch_max", ("first", "second")), ("batch_seconds", ("third",))]
    assert [e.text for e in events if isinstance(e, Reply)] == ["two at once", "one after a while"]


def test_a_user_message_drains_pending_impulses_into_its_prompt(make: Make) -> None:
    s = make([con("Sure, about that trip...")], [sub(loud="ask about the trip")])

    async def go() -> list[Any]:
        session = s.session()
        events: list[Any] = []
        session.subscribe(events.append)
        await session.start(cycles=1)
        while not session.mind.pending:  # cycle 1 queued its impulse; the 5 s batch waits
            await asyncio.sleep(0.01)
        await session.turn("anything new?")
        await session.idle()
        await session.close()
        return events

    events = asyncio.run(go())
    assert "<S_loud>\n- ask about the trip\n</S_loud>" in requests(s, "conscious")[0].messages[1].content
    assert not any(isinstance(e, TriggerFired) for e in events)  # the batch was cancelled


def test_pause_holds_the_loop_after_its_cycle_and_resume_continues(make: Make) -> None:
    s = make([], [sub("a"), sub("b"), sub("c")])

    async def go() -> tuple[int, int]:
        session = s.session()
        session.pause()
        await session.start(cycles=3)
        await asyncio.sleep(0.2)
        paused_at = session.mind.cycle
        session.resume()
        await session.idle()
        await session.close()
        return paused_at, session.mind.cycle

    assert asyncio.run(go()) == (0, 3)


def test_failed_cycles_back_off_and_lose_nothing(make: Make) -> None:
    s = make([con("hi")], [sub("calm")],
             backoff={"initial_seconds": 0.05, "max_seconds": 0.1})
    provider = s.provider_for("subconscious")[0]
    real = provider.complete
    failures = {"left": 2}

    async def flaky(request: Any) -> Any:  # the provider's server is down twice, then back
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("server unavailable")
        return await real(request)

    provider.complete = flaky
    provider.can_stream = False

    async def go() -> list[Any]:
        session = s.session()
        events: list[Any] = []
        session.subscribe(events.append)
        await session.turn("hi")
        await session.start(cycles=3)
        await session.idle()
        await session.close()
        return events

    events = asyncio.run(go())
    finished = [e for e in events if isinstance(e, CycleFinished)]
    assert [e.retry_in for e in finished[:2]] == [0.05, 0.1] and all(e.error for e in finished[:2])
    assert finished[2].error is None and "backing_off" in [e.status for e in events if isinstance(e, LoopStatus)]
    third = provider.requests[-1].messages[1].content
    assert "<ED_user>\nhi\n</ED_user>" in third  # what the failed cycles took was given back


def test_histories_are_summarised_every_n_cycles_with_a_digest_when_the_call_fails(make: Make, soul_home: Path) -> None:
    replies = [sub(quiet=f"note {i}") for i in range(1, 5)]
    # cycle 2 and 4 summarise; the first summary call succeeds, the second runs out of script
    s = make([], [replies[0], replies[1], "the user was greeted twice", replies[2], replies[3]],
             summarize_every=2, history=1)
    session = s.session()
    asyncio.run(run(session, [], cycles=4))
    rows = sqlite3.connect(soul_home / "soul.db").execute(
        "SELECT layer, summary, cycle_from, cycle_to, digest FROM context_summaries ORDER BY id").fetchall()
    assert rows[0] == ("S_quiet_history", "[Previous summary]: the user was greeted twice", 1, 1, 0)
    assert rows[1][0] == "S_quiet_history" and rows[1][4] == 1 and "note 3" in rows[1][1]
    assert session.mind.histories()["S_quiet_history"][-1] == "note 4"


def test_a_resumed_session_continues_its_cycle_count_and_histories(make: Make) -> None:
    s = make([], [sub("calm", quiet="first note"), sub(quiet="second note"), sub("alert")])
    session = s.session()
    asyncio.run(run(session, [], cycles=2))
    again = s.session(session.id)
    assert again.mind.cycle == 2 and again.mind.mood == "calm"
    assert again.mind.histories()["S_quiet_history"] == ("first note", "second note")
    asyncio.run(run(again, [], cycles=1))
    assert again.mind.cycle == 3 and again.mind.mood == "alert"


def test_the_persona_core_is_snapshotted_and_never_written(make: Make, tmp_path: Path) -> None:
    s = make([], [sub("calm"), sub("calm")])
    core = tmp_path / "csd" / "csd_core.md"
    before = hashlib.sha256(core.read_bytes()).hexdigest()
    session = s.session()
    core.write_text("# An edited core\nYou are someone else entirely.\n")  # edited after the session began
    edited = hashlib.sha256(core.read_bytes()).hexdigest()
    asyncio.run(run(session, [], cycles=1))
    assert hashlib.sha256(core.read_bytes()).hexdigest() == edited != before  # the program wrote nothing
    system = requests(s, "subconscious")[0].messages[0].content
    assert system.startswith("# Persona Core — Csd") and "someone else" not in system
    stored = s.store.persona_core(session.id, "subconscious")
    assert stored.sha256 == before
    resumed = s.session(session.id)
    asyncio.run(run(resumed, [], cycles=1))
    assert "someone else" not in requests(s, "subconscious")[-1].messages[0].content


def test_a_chosen_persona_core_serves_that_session_only(make: Make, tmp_path: Path) -> None:
    s = make([], [sub("calm"), sub("calm")])
    other = tmp_path / "other_core.md"
    other.write_text("# Another core\nA gardener's subconscious.\n")
    asyncio.run(run(s.session(persona_core=other), [], cycles=1))
    asyncio.run(run(s.session(), [], cycles=1))
    first, second = (r.messages[0].content for r in requests(s, "subconscious"))
    assert first.startswith("# Another core") and second.startswith("# Persona Core — Csd")


def test_an_internal_dialog_with_no_tags_keeps_it_all_quiet(make: Make) -> None:
    s = make(["I will just say everything here, untagged"], [])
    result = s.session().turn_sync("hi")
    assert result.reply == ""
    assert result.steps["respond"]["quiet"] == "I will just say everything here, untagged"


def test_silence_sends_nothing(make: Make) -> None:
    s = make([con("[NO_EXTERNAL_OUTPUT]", "better to wait")], [])
    assert s.session().turn_sync("...").reply == ""


def test_the_builtin_csd_soul_validates_and_runs_its_loop_on_any_model(soul_home: Path) -> None:
    from soul.providers import ScriptedProvider

    s = soul.load("csd", provider=ScriptedProvider([con("Hi."), sub("warm", "listen"), sub("warm", "listen")]), home=soul_home)
    session = s.session()
    events = asyncio.run(run(session, ["hello"], cycles=2))
    assert [e.text for e in events if isinstance(e, Reply)] == ["Hi."]
    assert session.mind.mood == "warm" and not [e for e in events if isinstance(e, ImpulseQueued)]


def test_idle_and_schedule_triggers_start_spontaneous_turns_for_any_soul(write_blueprint: Any, soul_home: Path) -> None:
    from soul.providers import ScriptedProvider

    path = write_blueprint("""\
soul: nudger
version: 1
steps:
  reply: {uses: external_dialogue}
triggers:
  nudge: {kind: idle, idle_seconds: 0.2}
  tick: {kind: schedule, interval_seconds: 0.3}
""")
    reply = "<external_dialogue>{}</external_dialogue>"
    s = soul.load(path, provider=ScriptedProvider([reply.format("hi"), *(reply.format(f"still here {i}") for i in range(10))]), home=soul_home)

    async def go() -> list[Any]:
        session = s.session()
        events: list[Any] = []
        session.subscribe(events.append)
        await session.start()
        await session.turn("hello")  # re-arms the idle timer
        await asyncio.sleep(0.5)
        await session.close()
        return events

    events = asyncio.run(go())
    reasons = [e.reason for e in events if isinstance(e, TriggerFired)]
    assert "idle" in reasons and "schedule" in reasons
    assert reasons.count("idle") == 1  # once per silence, not again until the user speaks
    assert all(e.spontaneous for e in events if isinstance(e, Reply))


@pytest.mark.parametrize("loud, shown", [("[NO_EXTERNAL_OUTPUT]", ""), ("[NO, I think not]", "[NO, I think not]"), ("Hello there", "Hello there")])
def test_a_streamed_internal_dialog_never_streams_its_silence_word(make: Make, tmp_path: Path, loud: str, shown: str) -> None:
    s = make([con(loud, "SECRET-QUIET")], [])
    text = (tmp_path / "csd" / "csd.yaml").read_text().replace("uses: internal_dialog", "uses: internal_dialog\n    stream: true")
    (tmp_path / "csd" / "csd.yaml").write_text(text)
    s = soul.load(tmp_path / "csd" / "csd.yaml", home=s.home)

    async def go() -> list[Any]:
        return [e async for e in s.session().stream("hi")]

    events = asyncio.run(go())
    assert "".join(e.text for e in events if isinstance(e, Token)) == shown
    assert [e.text for e in events if isinstance(e, Reply)] == [shown]


def test_the_context_window_names_the_mood_the_impulses_and_a_cycles_input(make: Make) -> None:
    from soul.runtime import turn_window

    s = make([con("Hello!"), con("How was the trip?")],
             [sub("calm", "be brief", loud="ask about the trip", trigger=True), sub()])
    session = s.session()
    asyncio.run(run(session, ["hi, back from a trip"], cycles=2))
    traces = s.store.traces(session.id)
    spontaneous = next(t for t in traces if t["kind"] == "spontaneous")
    window = turn_window(spontaneous["trace"])["calls"][0]
    parts = [(x["part"], x["label"]) for x in window["sections"]]
    assert ("mood & criteria", "") in parts and ("impulses", "S_loud") in parts and ("message", "spontaneous") in parts
    assert sum(x["tokens"] for x in window["sections"]) == window["input_tokens"] > 0
    cycle = next(t for t in traces if t["kind"] == "cycle")
    cycle_window = turn_window(cycle["trace"])
    assert cycle_window["kind"] == "cycle:subconscious" and ("message", "cycle") in [(x["part"], x["label"]) for x in cycle_window["calls"][0]["sections"]]


def _speaking(session: Any, cycles: int, then: str | None = None) -> Any:
    """Run `cycles` cycles (each with an impulse to act on now), then optionally a user turn;
    the events, the spontaneous replies and what is still pending."""

    async def go() -> tuple[list[Any], tuple[str, ...]]:
        events: list[Any] = []
        session.subscribe(events.append)
        await session.start(cycles=cycles)
        await session.idle()
        pending = tuple(session.mind.pending)
        if then is not None:
            async for event in session.stream(then):
                events.append(event)
        await session.close()
        return events, pending

    return asyncio.run(go())


def test_a_soul_speaks_unprompted_at_most_once_then_waits_for_the_user(make: Make) -> None:
    # csd spoke unprompted three times before the user typed anything: by default an s_loud
    # trigger's second impulse waits for the user's message instead
    s = make([con("By the way, how was the trip?"), con("Yes, and the photos?")],
             [sub(loud="ask about the trip", trigger=True), sub(loud="ask about the photos", trigger=True),
              sub(loud="and the weather", trigger=True)], loop="interval", interval_seconds=0.05)
    events, pending = _speaking(s.session(), 3, then="It was lovely.")
    spoken = [e.text for e in events if isinstance(e, Reply) and e.spontaneous]
    assert spoken == ["By the way, how was the trip?"]
    assert pending == ("ask about the photos", "and the weather")  # kept for the user's message
    prompt = requests(s, "conscious")[-1].messages[-1].content
    assert "ask about the photos" in prompt and "and the weather" in prompt  # the user's turn took them


def test_after_the_user_speaks_the_soul_may_speak_unprompted_again(make: Make) -> None:
    s = make([con("How was the trip?"), con("Lovely, tell me more."), con("And the photos?")],
             [sub(loud="ask about the trip", trigger=True), sub(loud="ask how it felt", trigger=True),
              sub(loud="ask about the photos", trigger=True)], loop="interval", interval_seconds=1.0)

    async def go() -> tuple[list[str], tuple[str, ...]]:
        session = s.session()
        events: list[Any] = []
        session.subscribe(events.append)
        await session.start(cycles=3)
        while len(session.mind.pending) < 1:  # cycle 2's impulse waits: the first one was spoken
            await asyncio.sleep(0.01)
        taken = tuple(session.mind.pending)
        await session.turn("It was lovely.")  # the user answers: it takes the waiting impulse
        await session.idle()  # cycle 3's impulse may be spoken unprompted again
        await session.close()
        return [e.text for e in events if isinstance(e, Reply) and e.spontaneous], taken

    spoken, taken = asyncio.run(go())
    assert taken == ("ask how it felt",)
    assert spoken == ["How was the trip?", "And the photos?"]


def test_unanswered_max_is_the_blueprints_to_change(make: Make) -> None:
    triggers = {"speak_up": {"kind": "s_loud", "source": "subconscious.impulse", "unanswered_max": 2}}
    s = make([con("One."), con("Two."), con("Three.")],
             [sub(loud="a", trigger=True), sub(loud="b", trigger=True), sub(loud="c", trigger=True)],
             loop="interval", interval_seconds=0.05, triggers=triggers)
    events, pending = _speaking(s.session(), 3)
    assert [e.text for e in events if isinstance(e, Reply) and e.spontaneous] == ["One.", "Two."]
    assert pending == ("c",)


def test_a_spontaneous_turn_that_stays_silent_does_not_count(make: Make) -> None:
    s = make([con("[NO_EXTERNAL_OUTPUT]"), con("Now I have something to say.")],
             [sub(loud="a passing thought", trigger=True), sub(loud="a real question", trigger=True)],
             loop="interval", interval_seconds=0.05)
    events, pending = _speaking(s.session(), 2)
    assert [e.text for e in events if isinstance(e, Reply) and e.spontaneous] == ["Now I have something to say."]
    assert pending == ()
