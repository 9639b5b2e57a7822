"""Issue 12 (item 12): a valid blueprint runs — a step that has not run reads as None, and a
template or gate that still fails is a StepError, never a raw jinja2 error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import soul
from soul.errors import StepError
from soul.providers.scripted import ScriptedProvider
from soul.runtime.events import Token

EVERY = """\
soul: gated
version: 1
mode: fused
state:
  mood: {default: calm}
steps:
  reply: {uses: external_dialogue, stream: true}
  st_check: {uses: soul_state_check, after: [reply], every: 3}
  st_update: {uses: soul_state_update, after: [st_check], when: steps.st_check.result}
"""
FUSED_TEMPLATE = """\
soul: fused
version: 1
mode: fused
steps:
  think: {uses: internal_monologue}
  reply: {uses: external_dialogue, after: [think], template: reply.j2}
"""
REPLY_J2 = "Answer plainly. You were thinking: {{ steps.think.text }}\n"


def write(tmp_path: Path, blueprint: str, **files: str) -> Path:
    path = tmp_path / "soul.yaml"
    path.write_text(blueprint)
    for name, text in files.items():
        (tmp_path / name.replace("_j2", ".j2")).write_text(text)
    return path


def test_a_when_reading_a_step_skipped_by_every_runs(tmp_path: Path, soul_home: Path) -> None:
    replies = ["<external_dialogue>Hi.</external_dialogue>"] * 2
    s = soul.load(write(tmp_path, EVERY), provider=ScriptedProvider(replies), home=soul_home)
    session = s.session()

    async def go() -> list[object]:
        return [e async for e in session.stream("hello")]

    events = asyncio.run(go())
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Hi."
    result = session.turn_sync("again")
    statuses = {st.step: st.status for st in result.trace.steps}
    assert statuses["st_check"] == "skipped" and statuses["st_update"] == "gated"
    assert session.turns == 2


def test_a_fused_template_reading_a_step_of_its_call_sees_none(tmp_path: Path, soul_home: Path) -> None:
    provider = ScriptedProvider(["<internal_monologue>hm</internal_monologue><external_dialogue>Hi.</external_dialogue>"])
    s = soul.load(write(tmp_path, FUSED_TEMPLATE, reply_j2=REPLY_J2), provider=provider, home=soul_home)
    assert s.session().turn_sync("hello").reply == "Hi."
    assert "You were thinking: None" in provider.requests[0].messages[0].content


def test_a_template_that_fails_is_a_step_error_before_any_call(tmp_path: Path, soul_home: Path) -> None:
    provider = ScriptedProvider(["<external_dialogue>Hi.</external_dialogue>"])
    broken = "{{ 1 // (turn.number - 1) }}\n"  # fails on turn 1 only: `1 // 0` is a validate error now
    s = soul.load(write(tmp_path, FUSED_TEMPLATE, reply_j2=broken), provider=provider, home=soul_home)
    session = s.session()
    with pytest.raises(StepError) as caught:
        session.turn_sync("hello")
    assert caught.value.step == "reply" and caught.value.kind == "external_dialogue"
    assert provider.calls == 0 and s.store.session(session.id).turns == 0


def test_a_gate_that_fails_on_none_is_a_step_error(tmp_path: Path, soul_home: Path) -> None:
    blueprint = EVERY.replace("when: steps.st_check.result", "when: steps.st_check.result > 1")
    provider = ScriptedProvider(["<external_dialogue>Hi.</external_dialogue>"])
    s = soul.load(write(tmp_path, blueprint), provider=provider, home=soul_home)
    with pytest.raises(StepError) as caught:
        s.session().turn_sync("hello")
    assert caught.value.step == "st_update"
