"""memory.recall / memory.store: the resonance memory engine as steps (no LLM call).

`memory.recall` searches the soul's field and puts the hits into a working-memory region for
the rest of the turn (the prompt shows it; templates read `memory.<region>` and the step's
`hits` / `text` outputs). `memory.store` asks for content to be remembered; the runtime writes
it to the field only after the turn has committed, so a failed turn remembers nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from soul.engines.resonance import Kind
from soul.kinds import ChangeContext, Changes, Output, StepEnv, StepKind, param, params_schema

# The seed's node types, as the resonance engine names them (its `kinds` module loads no numpy).
MEMORY_KINDS = tuple(kind.label for kind in Kind)
RECALL_MODES = ("hybrid", "semantic", "keyword")
# What a recall with `ask_used` adds to its region after its memories (the runtime's
# soul.runtime.bridges.learning reads the <used> section back when the soul's memory learns).
ASK_USED = ("If your answer uses any memory above, write their ids after your last section as "
            "<used>id, id</used>; write <used></used> if you used none.")


class MemoryRecall(StepKind):
    name = "memory.recall"
    description = "Recalls memories related to the input into a working-memory region."
    llm = False
    inputs = ("input", "memory", "params", "chetana")  # chetana: its affect weighs the memories
    outputs = (
        Output("hits", "list", "the memories recalled, best first: id, text, score, kind, tags"),
        Output("text", "text", "the hits as text, one per line"),
        Output("region", "text", "the working-memory region filled"),
        Output("ask_used", "bool", "whether the region asks the model to name the memories it used"),
    )
    params = params_schema(
        query=param({"type": "string", "format": "template"}, "a template for the query; default: the input text"),
        k=param({"type": "integer", "minimum": 1, "maximum": 100, "default": 5}, "how many memories"),
        mode=param({"enum": [*RECALL_MODES, "resonate"], "default": "hybrid"}, "how to search"),
        region=param({"type": "string", "default": "context"}, "the working-memory region to fill"),
        tags=param({"type": "array", "items": {"type": "string"}}, "tags that boost memories carrying them"),
        this_session=param({"type": "boolean", "default": False}, "also recall memories of this conversation (its turns are already in the prompt)"),
        ask_used=param({"type": "boolean", "default": False},
                       "show the memories with their ids and ask the model to name the ones it used in <used>id, id</used> (memory.learn reads it)"),
    )

    @classmethod
    async def run(cls, step: str, params: Mapping[str, Any], env: StepEnv) -> dict[str, Any]:
        recall = env.memory_config.get("recall") or {}
        mode = params.get("mode") or recall.get("mode") or "hybrid"
        k = int(params.get("k") or recall.get("k") or 5)
        region = params.get("region") or "context"
        query = env.render(params["query"]) if params.get("query") else env.input_text
        if not query.strip():
            return {"hits": [], "text": "", "region": region, "ask_used": False}
        memory = env.recall()
        skip = env.session if env.session and not params.get("this_session") else None
        want = 2 * k if skip else k  # room for the hits of this conversation that are dropped
        # the runtime's reader runs the query on the loop when that is quick (its vector warmed at
        # the turn's start, a small field), else in a worker thread; any other Recall: a thread
        search = "resonate" if mode == "resonate" else "recall"
        kwargs = ({"session": env.session, "tags": params.get("tags"), "affect": _affect(env)} if search == "resonate"
                  else {"mode": mode, "tags": params.get("tags")})
        soon = getattr(memory, f"{search}_soon", None)
        hits = await (soon(query, want, **kwargs) if soon else asyncio.to_thread(getattr(memory, search), query, want, **kwargs))
        hits = [h for h in hits if h.score > 0 and (skip is None or h.meta.get("session") != skip)][:k]
        rows = [{"id": h.id, "text": h.text, "score": round(h.score, 4), "kind": h.kind, "tags": list(h.tags)} for h in hits]
        return {"hits": rows, "text": "\n".join(h.text for h in hits), "region": region,
                "ask_used": bool(params.get("ask_used")) and bool(rows)}

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        # The region is this turn's context, not a lasting entry: it is filled again each turn.
        hits = outputs.get("hits") or []
        region = str(outputs.get("region") or "context")
        if outputs.get("ask_used") and hits:  # ids the model can name, then the question (kept: newest)
            return Changes(regions={region: (*(f"[{h['id']}] {h['text']}" for h in hits), ASK_USED)})
        return Changes(regions={region: tuple(h["text"] for h in hits)})


_AFFECT_NAMES = ("valence", "arousal", "frustration", "confidence")
_NUMBER = (int, float)  # not `int | float`: that builds a union object at every test


def _affect(env: StepEnv) -> dict[str, float] | None:
    """The query's affect for the scoring pipeline: Chetana's when the soul has it."""
    affect = (env.variables.get("chetana") or {}).get("affect")
    if not isinstance(affect, Mapping):
        return None
    return {n: float(affect[n]) for n in _AFFECT_NAMES if isinstance(affect.get(n), _NUMBER)}


class MemoryStore(StepKind):
    name = "memory.store"
    description = "Remembers content of the turn after it commits."
    llm = False
    inputs = ("input", "params")
    outputs = (
        Output("content", "text", "what will be remembered (empty: the exchange, known after the reply)"),
        Output("kind", "choice", "the memory kind"),
        Output("tags", "list", "the memory's tags"),
    )
    params = params_schema(
        content=param({"type": "string", "format": "template"}, "a template for what to remember; default: the exchange"),
        kind=param({"enum": list(MEMORY_KINDS), "default": "episode"}, "the memory kind"),
        tags=param({"type": "array", "items": {"type": "string"}}, "tags for the memory"),
    )
    effects = ("memory",)

    @classmethod
    async def run(cls, step: str, params: Mapping[str, Any], env: StepEnv) -> dict[str, Any]:
        content = env.render(params["content"]).strip() if params.get("content") else ""
        return {"content": content, "kind": params.get("kind") or "episode", "tags": list(params.get("tags") or ())}

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        item = {"text": outputs.get("content") or "", "kind": outputs.get("kind") or "episode",
                "tags": tuple(outputs.get("tags") or ()), "source": f"step:{step}"}
        return Changes(remember=(item,))
