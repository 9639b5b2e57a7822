"""user_model_check / user_model_update: does the soul's picture of the user need updating?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import ChangeContext, Changes, Output, Section, StepKind
from soul.records import MessageRecord, UserModelChange

USER_MODEL_SECTIONS = (
    "Persona", "Speaking Style", "Conversational Context", "Worldview",
    "Interests & Domains", "Working Patterns", "Most Potent Memories",
)


class UserModelCheck(StepKind):
    name = "user_model_check"
    description = "Decides whether this exchange taught something new about the user."
    inputs = ("soul", "input", "user_model")
    outputs = (Output("result", "bool", "true when the user model should be updated"),)
    sections = (
        Section(
            "user_model_check",
            "result",
            type="bool",
            description="true if you learned something new and lasting about the user, else false",
        ),
    )
    template = "user_model_check.j2"
    history_turns = 2  # judges this exchange: the last turns are enough
    history_share = 0.2

    # Its message (the stored check) is all it leaves: the question is no working memory.


class UserModelUpdate(StepKind):
    name = "user_model_update"
    description = "Rewrites the markdown user model (seven sections) with a note on what changed."
    inputs = ("soul", "input", "user_model")
    outputs = (
        Output("model", "markdown", "the whole updated user model"),
        Output("change_note", "text", "one line on what changed"),
    )
    sections = (
        Section(
            "user_model_update",
            "model",
            type="markdown",
            description="the complete updated user model in markdown, with the sections "
            + ", ".join(USER_MODEL_SECTIONS),
        ),
        Section("model_change_note", "change_note", description="one line: what changed and why"),
    )
    template = "user_model_update.j2"
    effects = ("user_model",)

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        model = (outputs.get("model") or "").strip()
        if not model:
            return Changes(flags=("user_model_update was empty; the user model is unchanged",))
        note = (outputs.get("change_note") or "").strip() or "updated"
        message = MessageRecord("internal", "model_change_note", note, step)
        return Changes(messages=(message,), user_model=UserModelChange(model, note, step))
