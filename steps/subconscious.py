"""The AgentCSD layers: the subconscious (mood & criteria, S_loud) and the internal dialog."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import ChangeContext, Changes, Output, Section, StepKind
from soul.records import MessageRecord

SILENCE = "[NO_EXTERNAL_OUTPUT]"


class MoodAndCriteria(StepKind):
    name = "mood_and_criteria"
    description = "The subconscious sets the current mood and the criteria the conscious layer follows."
    inputs = ("soul", "input", "memory", "state")
    outputs = (
        Output("mood", "text", "the current mood"),
        Output("criteria", "text", "the criteria for the conscious layer"),
    )
    # On the local model the framework starts each content ("I feel", "I should") and ends it
    # at a clause or sentence end: SmolLM2-135M copied the instructions into nearly every mood
    # otherwise (benchmarks/csd_echo.py, docs/benchmarks.md). The instructions are
    # parenthesised placeholders, so a copy of one is a placeholder the echo check refuses.
    sections = (
        Section("mood", "mood", description="(the mood now: two to four words)", budget=10,
                lead="I feel", ends=",.;:!?\n"),
        Section("criteria", "criteria", description="(one short sentence: how to reply next)", budget=32,
                lead="I should", ends=".!?\n"),
    )
    template = "mood_and_criteria.j2"
    effects = ("mood",)
    layer = "subconscious"

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        # the mood is committed as a mood_and_criteria row by the cycle (Commit.mood), not
        # as a message: the background runtime reads it from the outputs
        return Changes()


class SLoud(StepKind):
    name = "s_loud"
    description = "The subconscious speaks up: loud impulses, quiet notes, and the S_loud trigger."
    inputs = ("soul", "input", "memory")
    outputs = (
        Output("loud", "text", "an impulse that reaches the conscious layer"),
        Output("quiet", "text", "notes kept in the subconscious"),
        Output("trigger", "bool", "true to start a spontaneous turn"),
    )
    sections = (
        Section("S_loud", "loud", required=False, description="(one short sentence for the conscious mind, or nothing)",
                budget=32, lead="I want to", ends=".!?\n"),
        Section("S_quiet", "quiet", required=False, description="(a private note, or nothing)", budget=32,
                lead="I notice", ends=".!?\n"),
        Section("trigger", "trigger", type="bool", description="true to say it now, false to wait"),
    )
    template = "s_loud.j2"
    effects = ("impulses",)
    layer = "subconscious"

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        messages = []
        loud, quiet = (outputs.get("loud") or "").strip(), (outputs.get("quiet") or "").strip()
        if loud:
            messages.append(MessageRecord("subconscious", "S_loud", loud, step, meta={"trigger": outputs.get("trigger") is True}))
        if quiet:
            messages.append(MessageRecord("subconscious", "S_quiet", quiet, step))
        return Changes(messages=tuple(messages))


class InternalDialog(StepKind):
    name = "internal_dialog"
    description = "The conscious layer: loud output reaches the user, quiet output stays inside."
    streamable = True
    inputs = ("soul", "input", "memory", "state")
    outputs = (
        Output("loud", "text", "what reaches the user (empty: nothing)"),
        Output("quiet", "text", "private reasoning"),
    )
    sections = (
        Section("ID_quiet", "quiet", required=False, description="a private thought, in one sentence"),
        Section(
            "ID_loud",
            "loud",
            required=False,
            description="the reply to the user, or [NO_EXTERNAL_OUTPUT] to stay silent",
        ),
    )
    template = "internal_dialog.j2"
    unparsed = "quiet"  # neither tag parsed: all of it is quiet, nothing reaches the user
    stream_tag = "ID_loud"
    silence = SILENCE

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        messages = []
        quiet, loud = outputs.get("quiet"), (outputs.get("loud") or "").strip()
        if quiet:
            messages.append(MessageRecord("internal", "ID_quiet", quiet, step))
        # AgentCSD: an empty or [NO_EXTERNAL_OUTPUT] loud part means nothing reaches the user
        speaks = bool(loud) and loud != SILENCE
        if speaks:
            messages.append(MessageRecord("external", "ID_loud", loud, step))
        return Changes(messages=tuple(messages), reply=loud if speaks else None)
