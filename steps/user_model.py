"""user_model_check / user_model_update: does the soul's picture of the user need updating?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import ChangeContext, Changes, Output, Section, Seen, StepKind
from soul.records import MessageRecord, UserModelChange
from soul.sections import parse_bool

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
    def refusals(cls, outputs: Mapping[str, Any], seen: Seen) -> Mapping[str, str]:
        """An update that is not a user model: only a yes/no (a small model copying the check),
        or a copy of the reply (or of the user's message, or of another thing the turn wrote).
        An empty one is not refused: it leaves the user model unchanged, as the template allows."""
        model = (outputs.get("model") or "").strip()
        if not model:
            return {}
        redo = "write the whole updated user model in markdown, with its sections"
        if parse_bool(model) is not None:
            return {"user_model_update": f"holds only {model[:20]!r}, not a user model: {redo}"}
        if seen.holds(model, "user_model_update"):
            return {"user_model_update": f"copies your reply or the user's message, not a user model: {redo}"}
        return {}

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        model = (outputs.get("model") or "").strip()
        if not model:
            return Changes(flags=("user_model_update was empty; the user model is unchanged",))
        note = (outputs.get("change_note") or "").strip() or "updated"
        message = MessageRecord("internal", "model_change_note", note, step)
        return Changes(messages=(message,), user_model=UserModelChange(model, note, step))
