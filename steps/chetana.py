"""chetana.context: exposes the Chetana engine's view of the turn as step outputs."""

from __future__ import annotations

from soul.stepkind import Output, StepKind


class ChetanaContext(StepKind):
    name = "chetana.context"
    description = "Affect, focus, self-assessment, intentions and steering from Chetana (no LLM)."
    llm = False
    inputs = ("input", "chetana")
    outputs = (
        Output("affect", "mapping", "valence, arousal, confidence, frustration"),
        Output("focus", "list", "the concepts in focus"),
        Output("self_assessment", "text", "a one-line self-assessment"),
        Output("intentions", "list", "the active intentions"),
        Output("steering", "list", "steering suggestions"),
    )
