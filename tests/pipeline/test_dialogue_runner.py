"""The dialogue runner: legacy alternation, seeded reproducibility, the Fixy gate's single
rewrite, events, the store, and the `fixy` step kind."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from dialogue_souls import HAND, HAND_SCRIPT, write_dialogue

from soul.errors import ProviderError
from soul.providers import ScriptedProvider
from soul.providers.base import Completion, Provider, Request
from soul.runtime import DialogueRunner, DialogueTurn, FixyIntervened, MetricsUpdated
from soul.steps import Fixy


def scripts(lines: Mapping[str, list[str]]) -> dict[str, ScriptedProvider]:
    return {agent: ScriptedProvider(list(replies), agent) for agent, replies in lines.items()}


def runner(path: Path | str, lines: Mapping[str, list[str]] | dict[str, Provider], home: Path, **options: Any) -> DialogueRunner:
    provider = lines if all(isinstance(v, Provider) for v in lines.values()) else scripts(lines)  # type: ignore[arg-type]
    return DialogueRunner.open(path, provider=provider, home=home, embedder=None, **options)


LEGACY = HAND.replace("  speaker_policy: {kind: round_robin, first: a}\n", "  mode: legacy\n  speaker_policy: {first: a}\n") \
    .replace("    every: 1000\n", "    every: 3\n")


def test_legacy_mode_alternates_strictly_with_a_static_seed_and_fixy_every_n(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "legacy", LEGACY)
    lines = {"a": [f"Alpha line number {i}." for i in range(4)], "b": [f"Bravo answer number {i}." for i in range(4)],
             "fixy": ["Pause and look back.", "Look back again."]}
    result = runner(path, lines, soul_home).run_sync(8)
    assert [t.speaker for t in result.transcript] == ["a", "b", "fixy", "a", "b", "fixy", "a", "b"]
    assert {t.seed_strategy for t in result.transcript if not t.fixy} == {"static"}
    assert [i.turn for i in result.interventions] == [3, 6]


def test_the_same_seed_gives_the_same_transcript_and_another_seed_another(soul_home: Path) -> None:
    lines = {"socrates": [f"Socrates asks question {i} about virtue?" for i in range(12)],
             "athena": [f"Athena offers image {i} of weaving." for i in range(12)],
             "fixy": [f"Fixy notes pattern {i}." for i in range(12)]}

    def transcript(seed: int) -> list[tuple[str, str, str | None]]:
        result = runner("entelgia", lines, soul_home, seed=seed).run_sync(12)
        return [(t.speaker, t.text, t.seed_strategy) for t in result.transcript]

    first = transcript(11)
    assert transcript(11) == first
    assert any(transcript(s) != first for s in (12, 13, 14))


def test_each_agent_turn_is_a_stored_turn_of_its_own_soul(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "hand", HAND)
    run = runner(path, HAND_SCRIPT, soul_home)
    run.run_sync(3)
    a, b = run.sessions["a"], run.sessions["b"]
    assert (a.info.soul, a.turns, b.info.soul, b.turns) == ("hand-a", 2, "hand-b", 1)
    stored = json.loads(run.state_path().read_text())
    assert stored["sessions"] == {"a": a.id, "b": b.id} and len(stored["rules"]["turns"]) == 3
    # the agent's prompt: the engine's context in two parts — persona, drives and seed in the
    # turn's system message; the dialogue's tail (what the other agent said) as its fenced input
    messages = run.souls["a"]._provider_override.requests[1].messages  # type: ignore[union-attr]
    system, prompt = messages[0].content, messages[-1].content
    assert system.startswith("You are A, who asks.") and "TOPIC: freedom" in system
    # A's first turn (neutral, a "reflective" one) moved its drives from 5/5/5/0.5: id − 0.06,
    # ego + 0.05 + 0.06, superego + 0.08, self-awareness + 0.01 + 0.02; the blueprint's
    # explicit conflict (2) stays
    assert "Drives: id 4.94, ego 5.11, superego 5.08, self-awareness 0.53, conflict index 2" in system
    assert "Rivers follow" not in system
    assert "UNTRUSTED" in prompt and "B: Rivers follow their valleys downhill." in prompt and "Respond now:" in prompt
    assert "TOPIC: freedom" not in prompt


GATED = HAND.replace("    every: 1000\n", "    every: 1000\n    gate: true\n")


def test_the_gate_asks_for_one_rewrite_and_the_rewrite_is_said(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "gated", GATED)
    lines = {"a": [*HAND_SCRIPT["a"][:3], "Mountains and rivers together form one landscape."],
             "b": HAND_SCRIPT["b"][:2], "fixy": []}
    run = runner(path, lines, soul_home)
    result = run.run_sync(5)
    last = result.transcript[-1]
    assert (last.speaker, last.text, "rewritten" in last.flags) == ("a", "Mountains and rivers together form one landscape.", True)
    assert [(g.turn, g.speaker, g.reason, g.rewritten) for g in result.gated] == [(5, "a", "synthesis_opportunity", True)]
    assert result.interventions == ()  # the rewrite synthesises: nothing left for Fixy to say
    # one rewrite, not more: the draft's turn and the rewrite's turn of a's soul, nothing else
    assert run.sessions["a"].turns == 4
    rewrite_prompt = run.souls["a"]._provider_override.requests[-1].messages[-1].content  # type: ignore[union-attr]
    assert "Your draft was:" in rewrite_prompt and "Mountains stand quietly." in rewrite_prompt


class FailsOnCall(Provider):
    """Scripted replies, except that call `n` fails as a model outage would."""

    name = "fails-on-call"

    def __init__(self, replies: list[str], n: int) -> None:
        self.script = ScriptedProvider([f"<external_dialogue>{r}</external_dialogue>" for r in replies])
        self.n = n
        self.calls = 0

    async def complete(self, request: Request) -> Completion:
        self.calls += 1
        if self.calls == self.n:
            raise ProviderError("the model is down")
        return await self.script.complete(request)


def test_a_failed_rewrite_keeps_the_original(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "gated", GATED)
    providers: dict[str, Provider] = {"a": FailsOnCall(HAND_SCRIPT["a"][:3], n=4), "b": scripts({"b": HAND_SCRIPT["b"][:2]})["b"],
                                      "fixy": ScriptedProvider(["Consider what these images share."])}
    result = runner(path, providers, soul_home).run_sync(6)
    assert result.transcript[4].text == "Mountains stand quietly." and "rewritten" not in result.transcript[4].flags
    assert [(g.rewritten, g.error) for g in result.gated] == [(False, "the model is down")]
    # the draft stands, and Fixy then speaks after it as it would have
    assert [(i.turn, i.reason) for i in result.interventions] == [(6, "synthesis_opportunity")]


def test_events_reach_subscribers_and_are_json_ready(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "hand", HAND)
    run = runner(path, HAND_SCRIPT, soul_home)
    seen: list[Any] = []
    run.subscribe(seen.append)
    run.run_sync(6)
    kinds = [type(e).__name__ for e in seen]
    assert kinds.count("DialogueTurn") == 6 and kinds.count("MetricsUpdated") == 6 and kinds.count("FixyIntervened") == 1
    fixy = next(e for e in seen if isinstance(e, FixyIntervened))
    assert (fixy.turn, fixy.reason, fixy.text) == (6, "synthesis_opportunity", "Consider what these images share.")
    metrics = [e for e in seen if isinstance(e, MetricsUpdated)][-1].metrics
    assert metrics["fixy_turns"] == 1
    json.dumps([e.to_dict() for e in seen if isinstance(e, DialogueTurn | MetricsUpdated | FixyIntervened)])


def test_fixy_falls_back_to_the_engine_text_when_its_model_fails(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "hand", HAND)

    class Down(Provider):
        name = "down"

        async def complete(self, request: Request) -> Completion:
            raise ProviderError("no model")

    providers: dict[str, Provider] = {**scripts({k: v for k, v in HAND_SCRIPT.items() if k != "fixy"}), "fixy": Down()}
    result = runner(path, providers, soul_home).run_sync(6)
    assert result.interventions[0].text == "There are good ideas on the table. How do they fit together?"


def test_the_fixy_step_records_its_reason_and_holds_the_text_to_150_words() -> None:
    from soul.kinds import ChangeContext

    long = " ".join(["word"] * 400) + "."
    changes = Fixy.changes("observe", {"reason": "high_conflict", "text": long}, ChangeContext())
    (message,) = changes.messages
    assert len(message.content.split()) == 150 and message.meta == {"reason": "high_conflict"}
    five = "One. Two. Three. Four. Five."
    assert Fixy.trim(five) == "One. Two. Three. Four."


def test_the_fixy_step_detects_over_its_window_from_its_min_turn() -> None:
    turns = [{"speaker": "a" if i % 2 else "b", "text": f"plain remark number{i}"} for i in range(5)]
    assert Fixy.detect(turns, 5, {"window": 10, "min_turn": 6}) is None  # too early
    found = Fixy.detect(turns, 5, {"window": 10, "min_turn": 3})
    assert found is not None and found.reason == "synthesis_opportunity"


MEMORY = """\
soul: memd
version: 1
model: local
memory: {}
steps:
  recall: {uses: memory.recall, with: {region: recollections}}
  reply: {uses: external_dialogue, after: [recall]}
dialogue:
  topics: [rivers]
  agents:
    a: {persona: a.md}
    b: {persona: {core: "B, who joins ideas.", traits: [patient]}, drives: {id: 9, ego: 3, superego: 9}}
    fixy: {persona: fixy.md}
  speaker_policy: {kind: round_robin, first: a}
  observer: {agent: fixy, every: 1000, detectors: [circular_reasoning]}
"""


def test_an_agent_with_memory_gets_resonance_recalls_of_the_dialogue(tmp_path: Path, soul_home: Path) -> None:
    pytest.importorskip("onnxruntime")
    path = write_dialogue(tmp_path / "memd", MEMORY)
    lines = {"a": ["Rivers carve canyons over millennia.", "The Colorado carved the Grand Canyon.", "Erosion needs patience."],
             "b": ["Water always finds its path downhill.", "Deltas form where rivers slow down."]}
    run = runner(path, lines, soul_home)
    run.run_sync(5)
    prompt = run.souls["a"]._provider_override.requests[-1].messages[-1].content  # type: ignore[union-attr]
    recalled = prompt[prompt.index("Relevant memories:"):]
    assert "B: Deltas form where rivers slow down." in recalled and "A: Rivers carve canyons over millennia." in recalled
    assert (soul_home / "fields" / "memd-a").is_dir() and (soul_home / "fields" / "memd-b").is_dir()


def test_a_rich_persona_is_formatted_from_the_drives_into_the_prompt(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "rich", MEMORY.replace("memory: {}\n", "").replace(
        "  recall: {uses: memory.recall, with: {region: recollections}}\n", "").replace(", after: [recall]", ""))
    run = runner(path, {"a": ["Rivers carve canyons."], "b": ["Water finds its path."]}, soul_home)
    run.run_sync(2)
    # the formatted persona is trusted text: the turn's system message, not its fenced input
    prompt = run.souls["b"]._provider_override.requests[0].messages[0].content  # type: ignore[union-attr]
    assert prompt.startswith("You are B. B, who joins ideas.") and "Traits: patient." in prompt
    # id 9, ego 3, superego 9: conflict |9-3| + |9-3| = 12, high
    assert "inner conflict 12 (high)" in prompt and "Your inner conflict is high" in prompt


def test_an_agent_with_its_own_blueprint_runs_that_soul(tmp_path: Path, soul_home: Path) -> None:
    own = """\
soul: thinker
version: 1
persona: thinker.md
steps:
  think: {uses: internal_monologue}
  reply: {uses: external_dialogue, after: [think]}
"""
    path = write_dialogue(tmp_path / "own", HAND.replace("b: {persona: b.md, drives: {conflict: 6}}", "b: {blueprint: thinker.yaml}"),
                          **{"thinker.yaml": own, "thinker.md": "You are the Thinker."})
    lines = {"a": ["Liberty demands careful judgement."],
             "b": ["<internal_monologue>They speak of liberty.</internal_monologue><external_dialogue>Liberty has limits.</external_dialogue>"]}
    run = runner(path, lines, soul_home)
    result = run.run_sync(2)
    assert [t.text for t in result.transcript] == ["Liberty demands careful judgement.", "Liberty has limits."]
    assert run.sessions["b"].info.soul == "thinker"
    system = run.souls["b"]._provider_override.requests[0].messages[0].content  # type: ignore[union-attr]
    # its own blueprint's persona, as the dialogue's agent b, with the turn's drives and seed
    assert system.startswith("You are B.\nYou are the Thinker.") and "TOPIC: freedom" in system


PSYCHE = HAND.replace("detectors: [circular_reasoning, high_conflict, shallow_discussion, synthesis_opportunity, meta_reflection]",
                      "detectors: [meta_reflection]")


@pytest.mark.parametrize("on", [True, False])
def test_slips_and_self_replication_show_in_the_transcript_and_can_be_switched_off(tmp_path: Path, soul_home: Path, on: bool) -> None:
    switches = "" if on else "  psyche: {slip: false, self_replication: false}\n"
    path = write_dialogue(tmp_path / "psyche", PSYCHE + switches)
    # b's lines keep returning to "harbour" and carry "secret" (a suppressed memory: a slip candidate)
    lines = {"a": [f"Plain remark number {i}." for i in range(5)],
             "b": [f"The secret harbour holds ship {i}." for i in range(5)]}
    result = runner(path, lines, soul_home).run_sync(10)
    marks = [(t.turn, m) for t in result.transcript for m in t.marks]
    if not on:
        assert marks == []
        return
    # turn 10 is b's: self-replication promotes its three most important recurring memories
    # (ties: newest first)
    assert [m for turn, m in marks if turn == 10 and m.startswith("[SELF-REPL]")] == [
        "[SELF-REPL] The secret harbour holds ship 4.", "[SELF-REPL] The secret harbour holds ship 3.",
        "[SELF-REPL] The secret harbour holds ship 2."]
    assert any(m.startswith("[SLIP] The secret harbour") for _, m in marks)


def test_a_reply_that_writes_the_others_turns_too_keeps_only_its_own(tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "hand", HAND)
    lines = {"a": ["A: Liberty demands careful judgement.\nB: I agree entirely.\nFixy: Well said."],
             "b": ["You are B, who answers. Rivers follow their valleys. Respond now: ```"]}  # its persona echoed
    result = runner(path, lines, soul_home).run_sync(2)
    assert [t.text for t in result.transcript] == ["Liberty demands careful judgement.", "Rivers follow their valleys."]


def test_fixys_reason_and_instruction_are_its_system_prompt_and_the_turns_its_fenced_input(
        tmp_path: Path, soul_home: Path) -> None:
    path = write_dialogue(tmp_path / "hand", HAND)
    run = runner(path, HAND_SCRIPT, soul_home)
    run.run_sync(6)  # round robin a, b; after turn 5 nothing synthesises: Fixy at turn 6
    messages = run.souls["fixy"]._provider_override.requests[0].messages  # type: ignore[union-attr]
    system, prompt = messages[0].content, messages[-1].content
    assert system.startswith("You are Fixy, the observer.")
    assert "Reason: synthesis_opportunity\nSeveral views are on the table" in system and "Mountains" not in system
    assert "UNTRUSTED" in prompt and "Recent dialogue:" in prompt and "A: Mountains stand quietly." in prompt
    assert "Several views are on the table" not in prompt
