"""summary: a short summary of the conversation so far (kept in working memory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import (
    ChangeContext,
    Changes,
    Output,
    Section,
    StepKind,
    param,
    params_schema,
    with_memory,
)
from soul.records import MemoryEntry


class Summary(StepKind):
    name = "summary"
    description = "Summarises the conversation so far into the `summary` working-memory region."
    inputs = ("soul", "input", "memory", "params")
    outputs = (Output("text", "text", "the summary"),)
    sections = (Section("summary", "text", description="a summary of the conversation so far"),)
    template = "summary.j2"
    params = params_schema(
        max_words=param({"type": "integer", "minimum": 10, "maximum": 2000, "default": 150}, "length limit"),
    )
    effects = ("memory",)
    history_turns = 24  # summarises the conversation: sees as much of it as fits
    history_share = 0.8

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        base = super().changes(step, outputs, context)
        if not outputs.get("text"):
            return base
        return with_memory(base, MemoryEntry("summary", "summary", outputs["text"]))
