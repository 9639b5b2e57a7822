"""chetana.context: exposes the Chetana engine's view of the turn as step outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soul.kinds import Output, StepEnv, StepKind


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

    @classmethod
    async def run(cls, step: str, params: Mapping[str, Any], env: StepEnv) -> dict[str, Any]:
        context = env.variables.get("chetana") or {}
        return {
            "affect": context.get("affect"),
            "focus": [c["concept"] for c in (context.get("focus") or {}).get("concepts", [])],
            "self_assessment": context.get("self_assessment"),
            "intentions": [i["goal"] for i in context.get("intentions", [])],
            "steering": list(context.get("steering", [])),
        }
