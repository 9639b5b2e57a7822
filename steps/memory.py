"""memory.recall / memory.store: the resonance memory engine as steps (no LLM call)."""

from __future__ import annotations

from soul.stepkind import Output, StepKind, param, params_schema

MEMORY_KINDS = ("episode", "fact", "preference", "correction", "belief", "wisdom", "insight")


class MemoryRecall(StepKind):
    name = "memory.recall"
    description = "Recalls memories related to the input into a working-memory region."
    llm = False
    inputs = ("input", "memory", "params")
    outputs = (
        Output("hits", "list", "the memories recalled, best first"),
        Output("text", "text", "the hits as text, one per line"),
    )
    params = params_schema(
        query=param({"type": "string"}, "a template for the query; default: the input text"),
        k=param({"type": "integer", "minimum": 1, "maximum": 100, "default": 5}, "how many memories"),
        mode=param({"enum": ["hybrid", "semantic", "keyword", "resonate"], "default": "hybrid"}, "how to search"),
        region=param({"type": "string", "default": "context"}, "the working-memory region to fill"),
    )


class MemoryStore(StepKind):
    name = "memory.store"
    description = "Remembers content of the turn after it commits."
    llm = False
    inputs = ("input", "params")
    outputs = (Output("ids", "list", "ids of the memories written"),)
    params = params_schema(
        content=param({"type": "string"}, "a template for what to remember; default: the exchange"),
        kind=param({"enum": list(MEMORY_KINDS), "default": "episode"}, "the memory kind"),
        tags=param({"type": "array", "items": {"type": "string"}}, "tags for the memory"),
    )
    effects = ("memory",)
