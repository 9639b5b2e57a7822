"""Chetana's context built only as far as a soul reads it: affect and steering, or everything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from souls import claudius_reply

import soul
import soul.runtime.turn.services as services_module
from soul.engines.chetana import ChetanaController
from soul.providers.scripted import ScriptedProvider
from soul.runtime.bridges import reads_whole_context

GARBAGE = "no sections at all"  # a reply that fails to parse, twice: the steps fail, frustration grows
LINES = ("Let's fix the parser and write a test for it.", "No, I meant the lexer, not the parser.",
         "The lexer tests fail on tabs.", *["No, that's wrong. Try again."] * 4, "Great, the tabs pass now.")


def _replies() -> list[str]:
    replies = []
    for i, line in enumerate(LINES):
        if line.startswith("No, that's"):
            replies += [GARBAGE, GARBAGE]
        else:  # every third turn checks the soul's state too
            replies.append(claudius_reply(check="false") + ("<soul_state_check>false</soul_state_check>" if i % 3 == 2 else ""))
    return replies


def _timeless(value: Any) -> Any:
    """`value` without the latencies Chetana measured (each run's own)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if "latency" not in k}
    if isinstance(value, list | tuple):
        return [_timeless(v) for v in value]
    return value


def _talk(home: Path) -> tuple[list[Any], list[Any], list[Any]]:
    provider = ScriptedProvider(_replies())
    s = soul.load("claudius", provider=provider, home=home)
    session = s.session(user="ada")
    states, events = [], []
    for line in LINES:
        result = session.turn_sync(line)
        states.append(_timeless(s.store.snapshot(session.id).chetana))
        events.append(_timeless([{k: v for k, v in e.items() if k != "time"} for e in result.trace.events]))
    prompts = [[(m.role, m.content) for m in request.messages] for request in provider.requests]
    return prompts, states, events


def test_a_soul_that_reads_only_affect_and_steering_builds_no_focus_and_runs_the_same(
        soul_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # claudius's templates read no `chetana` (issue 26: the focus and the self-assessment, built
    # at every turn's start, were read by nothing): its turns build neither, and every prompt,
    # every stored Chetana state and every event is what the whole context gave (their measured
    # latencies aside)
    built = []
    parts = ChetanaController.context_parts
    monkeypatch.setattr(ChetanaController, "context_parts", lambda self, affect: built.append(1) or parts(self, affect))
    lean = _talk(soul_home)
    assert built == []
    monkeypatch.setattr(services_module, "reads_whole_context", lambda plan, reads: True)
    whole = _talk(tmp_path / "whole")
    assert len(built) == len(LINES)
    assert lean == whole
    assert any("## Steering" in content for prompt in lean[0] for _, content in prompt)  # frustration steers


def _plan_reads(write_blueprint: Any, home: Path, steps: str, **files: str) -> bool:
    path = write_blueprint("soul: c\nversion: 1\nchetana: {}\nmemory: {}\nsteps:\n" + steps, **files)
    s = soul.load(path, provider=ScriptedProvider([]), home=home)
    return reads_whole_context(s.plan, s.services.builder.template_reads)


@pytest.mark.parametrize(("steps", "files", "whole"), [
    ("  recall: {uses: memory.recall}\n  reply: {uses: external_dialogue, after: [recall]}\n", {}, False),
    ("  reply: {uses: external_dialogue, template: reply.j2}\n",
     {"reply.j2": "{% include 'mood.j2' %}\n", "mood.j2": "{{ chetana.focus.concepts }}\n"}, True),
    ("  reply: {uses: external_dialogue, template: reply.j2}\n",
     {"reply.j2": "{% include ['a.j2', input.text] %}\n", "a.j2": "plain\n"}, True),
    ("  feel: {uses: chetana.context}\n  reply: {uses: external_dialogue, after: [feel]}\n", {}, True),
    ("  reply: {uses: external_dialogue, when: \"chetana.affect.frustration < 0.7\"}\n", {}, True),
    ("  recall: {uses: memory.recall, with: {query: '{{ chetana.self_assessment }}'}}\n"
     "  reply: {uses: external_dialogue, after: [recall]}\n", {}, True),
], ids=["recall-and-defaults", "included-template", "computed-include", "context-step", "gate", "query-param"])
def test_what_reads_the_whole_context_is_told_from_the_plan(write_blueprint, soul_home: Path, steps: str,  # type: ignore[no-untyped-def]
                                                            files: dict[str, str], whole: bool) -> None:
    assert _plan_reads(write_blueprint, soul_home, steps, **files) is whole


def test_a_template_reading_the_focus_through_an_include_sees_it(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(
        "soul: c\nversion: 1\nchetana: {}\nsteps:\n  reply: {uses: external_dialogue, template: reply.j2}\n",
        **{"reply.j2": "{% include 'focus.j2' %}\n",
           "focus.j2": "In focus: {{ chetana.focus.concepts | map(attribute='concept') | join(', ') }}\n"},
    )
    provider = ScriptedProvider(["<external_dialogue>ok</external_dialogue>"])
    soul.load(path, provider=provider, home=soul_home).session().turn_sync("Please refactor the tokenizer module")
    assert "In focus: " in provider.requests[0].messages[0].content
    assert "tokenizer" in provider.requests[0].messages[0].content
