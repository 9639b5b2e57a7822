"""fixy: the observer of a dialogue, who steps in when the talk loops, stalls or drifts."""

from __future__ import annotations

from soul.kinds import Output, Section, StepKind, param, params_schema

FIXY_REASONS = (
    "circular_reasoning", "high_conflict", "shallow_discussion",
    "synthesis_opportunity", "meta_reflection", "topic_drift", "persona_collapse",
)


class Fixy(StepKind):
    name = "fixy"
    description = "Watches the dialogue with rule-based detectors and writes an intervention when one fires."
    inputs = ("soul", "input", "memory", "params")
    outputs = (
        Output("reason", "choice", "the detector that fired: " + ", ".join(FIXY_REASONS)),
        Output("text", "text", "the intervention, 2-4 sentences"),
    )
    sections = (
        Section("fixy", "text", description="your intervention, 2-4 sentences, at most 150 words"),
    )
    template = "fixy.j2"
    layer = "external"
    params = params_schema(
        window=param({"type": "integer", "minimum": 2, "maximum": 50, "default": 10}, "turns to look at"),
        min_turn=param({"type": "integer", "minimum": 1, "default": 3}, "never intervene before this turn"),
    )
