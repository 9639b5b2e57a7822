"""external_dialogue: what the soul says to the user (the reply)."""

from __future__ import annotations

from soul.stepkind import Attribute, Output, Section, StepKind

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
