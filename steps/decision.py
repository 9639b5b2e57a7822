"""Open Souls' cognitive functions: decision, brainstorm and mental_query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import (
    Attribute,
    ChangeContext,
    Changes,
    Output,
    Section,
    StepKind,
    param,
    params_schema,
)
from soul.records import MemoryEntry, MessageRecord

ANSWERED_KEPT = 4096  # the changes of mental queries' answers kept (two per step of every soul loaded)
_ANSWERED: dict[tuple[type, str, bool], Changes] = {}


class Decision(StepKind):
    name = "decision"
    description = "Chooses one of the given options (Open Souls' decision)."
    inputs = ("soul", "input", "state", "params")
    outputs = (
        Output("choice", "choice", "the option chosen"),
        Output("reason", "text", "why, in a sentence"),
    )
    sections = (
        Section(
            "decision",
            "choice",
            type="choice",
            attributes=(Attribute("options", param="options"),),
            description="exactly one of the options, written as given",
        ),
        Section("decision_reason", "reason", required=False, description="why, in one sentence"),
    )
    template = "decision.j2"
    params = params_schema(
        ("question", "options"),
        question=param({"type": "string", "minLength": 1}, "what is being decided"),
        options=param(
            {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 2, "uniqueItems": True},
            "the options to choose from",
        ),
    )


class Brainstorm(StepKind):
    name = "brainstorm"
    description = "Lists a few ideas, one bullet line each (Open Souls' brainstorm)."
    inputs = ("soul", "input", "state", "params")
    outputs = (Output("ideas", "list", "the ideas, one string each"),)
    sections = (
        Section(
            "brainstorm",
            "ideas",
            type="list",
            attributes=(Attribute("count", param="count"),),
            description="one idea per line, each starting with '- '",
        ),
    )
    template = "brainstorm.j2"
    params = params_schema(
        ("question",),
        question=param({"type": "string", "minLength": 1}, "what to brainstorm about"),
        count=param({"type": "integer", "minimum": 1, "maximum": 20, "default": 3}, "how many ideas"),
    )


class MentalQuery(StepKind):
    name = "mental_query"
    description = "Answers a yes/no question about the conversation (Open Souls' mentalQuery)."
    inputs = ("soul", "input", "state", "user_model", "params")
    outputs = (Output("result", "bool", "the answer"),)
    sections = (
        Section("mental_query", "result", type="bool", description="true or false"),
    )
    template = "mental_query.j2"

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        result = outputs.get("result")
        if result is None:
            return Changes()
        if result is not True and result is not False:  # (parsed answers are booleans)
            return cls._answered(step, result)
        # A step's answer changes the same every time it is given: its message and working-memory
        # entry are made once per (kind, step, answer) and shared (records are never changed once made)
        key = (cls, step, result)
        found = _ANSWERED.get(key)
        if found is None:
            if len(_ANSWERED) >= ANSWERED_KEPT:
                _ANSWERED.clear()
            found = _ANSWERED[key] = cls._answered(step, result)
        return found

    @classmethod
    def _answered(cls, step: str, result: Any) -> Changes:
        meta = {"result": result}
        message = MessageRecord(cls.layer, "mental_query", "true" if result else "false", step, None, meta)
        # positionally (messages, state, user model, memory)
        return Changes((message,), None, None, (MemoryEntry("default", "mentalQuery", step, None, meta),))
    params = params_schema(
        ("query",),
        query=param({"type": "string", "minLength": 1}, "the statement to judge true or false"),
    )
