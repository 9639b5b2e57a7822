"""A turn's conversation under a budget: what each call may hold, and folding the history
that no call shows any more into the running summary.

`budget_for` gives a call its `Budget`: the slot's window and reply reserve
(`soul.providers.context_window`, `reply_tokens`), the token counter for its model, and what
its steps declare they see of the history — `history: {turns: N, share: X}` on a step, else
the kind's `history_turns` / `history_share`; a fused call takes the most of its steps.

`fold_history` runs after a turn's calls: when even the most generous call of the turn had
to leave older turns out (over its `turns`, or over its share of the window), those turns
and as many more as keep half of what it showed are folded by the soul's summary slot (`working_memory.summary.model`, else a slot named `cheap`) into
the running summary (`runtime/conversation/summaries.py`, the `summary` kind's template and section). The
summary is stored with the turn: a `context_summaries` row (layer `conversation`; its
`cycle_from`/`cycle_to` hold the turns it covers) and a `conversationSummary` entry in the
`summary` region, which the next turn (and a resumed session) reads back. A failed summary
call leaves a truncation digest instead, so the turn itself never fails on it; so does a soul
with no summary slot, which makes no extra call at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from soul.compiler import Plan, PlannedStep
from soul.language import Blueprint
from soul.providers import context_window, reply_tokens
from soul.records import MemoryEntry, SummaryRecord
from soul.runtime.conversation.budget import Budget, counter_for
from soul.runtime.conversation.history import SUMMARY_REGION, SUMMARY_TYPE
from soul.runtime.conversation.summaries import (
    DEFAULT_WORDS,
    SUMMARY_STEP,
    SummaryCall,
    instructions,
    system_prompt,
    truncation_digest,
)

log = logging.getLogger(__name__)

SUMMARY_LAYER = "conversation"  # the history's name in context_summaries


class SummaryServices(Protocol):
    """What folding needs of a turn's services (`runtime.turn.Services` is one): a model slot's
    provider, and the prompt builder's template environment for the summary's instructions."""

    @property
    def builder(self) -> Any: ...

    def provider(self, model: str) -> tuple[Any, str, dict[str, Any]]: ...


def _declared(bp: Blueprint, name: str) -> Mapping[str, Any]:
    """The `history:` a step declares (the turn's steps first, then subprocesses')."""
    step = bp.steps.get(name)
    if step is None:
        for sub in (*bp.subprocesses.values(), *bp.processes.values()):
            step = sub.steps.get(name)
            if step is not None:
                break
    return getattr(step, "history", None) or {}


def history_wanted(bp: Blueprint, steps: Sequence[PlannedStep]) -> tuple[int, float]:
    """The turns and share of a call's history: the most any of its steps wants."""
    turns, share = 0, 0.0
    for step in steps:
        declared = _declared(bp, step.name)
        turns = max(turns, int(declared.get("turns", step.kind.history_turns)))
        share = max(share, float(declared.get("share", step.kind.history_share)))
    return turns, share


def budget_for(bp: Blueprint, steps: Sequence[PlannedStep], spec: str, options: Mapping[str, Any], provider: Any = None) -> Budget:
    """The budget of one call over `steps` on the model `spec` (its slot's `options`)."""
    window = context_window(spec, options, provider)
    turns, share = history_wanted(bp, steps)
    return Budget(window, reply_tokens(spec, options, window), counter_for(spec, provider), turns, share)


def summary_model(bp: Blueprint) -> str | None:
    """The slot summaries are written on (`Blueprint.summary_model`: validation counts it as
    used); None folds into a digest, so a fused soul stays one call a turn."""
    return bp.summary_model()


async def fold_history(plan: Plan, services: SummaryServices, ts: Any) -> None:
    """Fold the turns no call of this turn showed (see the module's docstring); `ts` is the
    turn's `TurnState` (its context, the turns each call showed, and where the fold goes)."""
    history = ts.ctx.history
    if not ts.shown or not history:
        return
    shown = max(ts.shown)
    if shown >= len(history):
        return
    folded = history[: len(history) - (shown + 1) // 2]
    bp = plan.blueprint
    previous = ts.ctx.summary
    entries = [turn.line(bp.name) for turn in folded]
    words = int((getattr(bp, "summary", None) or {}).get("max_words") or DEFAULT_WORDS)
    model = summary_model(bp)
    try:
        if model is None:
            raise LookupError("no summary slot: declare working_memory.summary.model or a `cheap` slot")
        provider, spec, options = services.provider(model)
        guide = instructions(services.builder.env, {"name": bp.name, "title": bp.name.title()}, words)
        text, trace = await SummaryCall(provider, spec, options).run(
            system_prompt(bp.name, "conversation with the user", guide), previous.text if previous else None, entries)
        ts.calls.append(trace)
        digest = False
    except Exception as exc:  # the turn stands: a digest keeps the history bounded all the same
        (log.debug if model is None else log.warning)("summarising turns %d-%d failed (%s); kept a truncation digest", folded[0].number, folded[-1].number, exc)
        text, digest = truncation_digest(previous.text if previous else None, entries, noun="turn"), True
    first = previous.turn_from if previous else folded[0].number
    last = folded[-1].number
    # a turn's fold records start as empty tuples (`TurnState`): added to by making new ones
    ts.summaries = (*ts.summaries, SummaryRecord(SUMMARY_LAYER, text, first, last, digest))
    ts.folded = (*ts.folded, MemoryEntry(SUMMARY_REGION, SUMMARY_TYPE, text, meta={
        "turn_from": first, "turn_to": last, "digest": digest, "step": SUMMARY_STEP, "kind": "summary",
        "turn": ts.ctx.number}))
