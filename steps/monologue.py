"""internal_monologue: the soul thinks to itself before it speaks (never shown to the user)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import Attribute, ChangeContext, Changes, Output, Section, StepKind, with_memory
from soul.records import MemoryEntry

MONOLOGUE_VERBS = (
    "thought", "mused", "pondered", "wondered", "considered",
    "reflected", "entertained", "recalled", "noticed", "weighed",
)


class InternalMonologue(StepKind):
    name = "internal_monologue"
    description = "A private thought about the message, before replying; never shown to the user."
    inputs = ("soul", "input", "state", "user_model", "memory", "chetana")
    outputs = (
        Output("text", "text", "the thought"),
        Output("verb", "choice", "how it was thought: " + ", ".join(MONOLOGUE_VERBS)),
    )
    sections = (
        Section(
            "internal_monologue",
            "text",
            attributes=(Attribute("verb", "verb", MONOLOGUE_VERBS),),
            description="your private thoughts, in one to three sentences; the user never sees them",
        ),
    )
    template = "internal_monologue.j2"
    history_turns = 8
    history_share = 0.5

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        base = super().changes(step, outputs, context)
        if outputs.get("text") is None:
            return base
        entry = MemoryEntry("default", "internalMonologue", outputs["text"], outputs.get("verb"))
        return with_memory(base, entry)
