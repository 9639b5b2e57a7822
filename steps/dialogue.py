"""external_dialogue: what the soul says to the user (the reply)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import Attribute, ChangeContext, Changes, Output, Section, StepKind, with_memory

DIALOGUE_VERBS = (
    "said", "explained", "offered", "suggested", "noted", "observed", "replied",
    "interjected", "declared", "quipped", "remarked", "detailed", "pointed out", "corrected",
)


class ExternalDialogue(StepKind):
    name = "external_dialogue"
    description = "The reply the user reads."
    streamable = True
    inputs = ("soul", "input", "state", "user_model", "memory", "chetana")
    outputs = (
        Output("text", "text", "the reply"),
        Output("verb", "choice", "how it was said: " + ", ".join(DIALOGUE_VERBS)),
    )
    sections = (
        Section(
            "external_dialogue",
            "text",
            attributes=(Attribute("verb", "verb", DIALOGUE_VERBS),),
            description="what you say to the user",
        ),
    )
    template = "external_dialogue.j2"
    layer = "external"
    history_turns = 12  # the reply needs the conversation most
    history_share = 0.6

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        base = super().changes(step, outputs, context)
        text = outputs.get("text")
        if text is None:
            return base
        # the reply reaches the conversation's history through the turn (one entry a turn)
        return with_memory(base, reply=text)
