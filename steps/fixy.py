"""fixy: the observer of a dialogue, who steps in when the talk loops, stalls or drifts.

Deciding *whether* and *why* Fixy speaks is the rules engine's (`soul.engines.dialogue`: the
original's five detectors with whole-word matching, plus topic drift and persona collapse);
`Fixy.detect` runs them over the step's `window` of turns, never before `min_turn`. The dialogue
runner (`soul.runtime.dialogue.runner`) asks it after every turn and, when one fires, runs the step
with the detector's instruction and the last turns as its input; the model writes the
intervention, 2-4 sentences, which `Fixy.trim` holds to four sentences and 150 words. The
`reason` output is the detector that fired (the section's attribute, which the runner's prompt
fixes and the runner records whatever the model wrote).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from soul.records import MessageRecord

FIXY_REASONS = (
    "circular_reasoning", "high_conflict", "shallow_discussion",
    "synthesis_opportunity", "meta_reflection", "topic_drift", "persona_collapse",
)
MAX_WORDS = 150
MAX_SENTENCES = 4


class Fixy(StepKind):
    name = "fixy"
    description = "Watches the dialogue with rule-based detectors and writes an intervention when one fires."
    inputs = ("soul", "input", "memory", "params")
    outputs = (
        Output("reason", "choice", "the detector that fired: " + ", ".join(FIXY_REASONS)),
        Output("text", "text", "the intervention, 2-4 sentences, at most 150 words"),
    )
    sections = (
        Section(
            "fixy", "text",
            attributes=(Attribute("reason", "reason", FIXY_REASONS),),
            description="your intervention, 2-4 sentences, at most 150 words",
        ),
    )
    template = "fixy.j2"
    layer = "external"
    params = params_schema(
        window=param({"type": "integer", "minimum": 2, "maximum": 50, "default": 10}, "turns the detectors look at"),
        min_turn=param({"type": "integer", "minimum": 1, "default": 3}, "never intervene before this turn"),
    )

    @classmethod
    def detect(
        cls,
        turns: Sequence[Any],
        turn: int,
        params: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> Any:
        """The engine's first detector that fires over the last `window` turns at turn
        `turn` (None before `min_turn` or when none fires). `context` goes to the engine as
        is: the topic, the embedder and the agents' personas that topic drift and persona
        collapse need (without an embedder those two stay off)."""
        from soul.engines.dialogue import detect

        params = params or {}
        window = int(params.get("window", 10))
        min_turn = int(params.get("min_turn", 3))
        return detect(turns, turn, window=window, min_turn=min_turn, **context)

    @staticmethod
    def trim(text: str) -> str:
        """An intervention held to four sentences and 150 words (the engine's rule)."""
        from soul.engines.dialogue import trim_intervention

        return str(trim_intervention(text, max_sentences=MAX_SENTENCES, max_words=MAX_WORDS))

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        text = outputs.get("text")
        if text is None:
            return Changes()
        reason = outputs.get("reason")
        meta = {"reason": reason} if reason else {}
        return Changes(messages=(MessageRecord(cls.layer, "fixy", cls.trim(str(text)), step, None, meta),))

