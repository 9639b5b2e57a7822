"""Fixy as a gate on any soul's reply: the blueprint's top-level `observer:` block.

With `observer: {gate: true}`, the observer sees a turn's reply before it is sent: Fixy's
detectors (the `fixy` step kind's, that is the dialogue rules engine's) read the conversation
so far with the draft as its newest line. When one fires, the turn is run once more with
Fixy's reason and instruction in the system prompt ("## Rewrite"); that second reply is sent
and committed. Bounded: at most one rewrite a turn, and when the rewrite fails (a model or
step error, or an empty reply) the draft stands. Nothing of the draft is streamed before the
verdict: its events are held and released only when the draft is what gets sent.

The conversation the detectors read is the turn's history (speaker-labelled, as the prompt
has it: the user's name and the soul's) plus this message and the draft; turns are counted
as lines, so `min_turn` (3 by default, the original's) counts lines, not exchanges.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soul.errors import RunError, SoulError
from soul.runtime.conversation import HistoryTurn
from soul.runtime.events import FixyGated
from soul.runtime.turn.commit import reply_of
from soul.runtime.turn.context import start_turn
from soul.runtime.turn.runner import ScopeRunner

if TYPE_CHECKING:
    from soul.compiler import Plan
    from soul.records import Snapshot
    from soul.runtime.turn.context import TurnState
    from soul.runtime.turn.services import Services

log = logging.getLogger(__name__)

REWRITE = (
    "Fixy, the observer, read your draft reply before it was sent and asks for one rewrite "
    "({reason}): {instruction}\nWrite your reply again, in the same format, taking this into "
    "account. Your draft was:\n{draft}"
)
DRAFT_CHARS = 1200  # of the draft shown back to the model
# A reply is judged by what makes it a bad reply (going in circles, arguing without end); the
# facilitation detectors (synthesis opportunity, meta reflection, shallow discussion) fire on
# most turns of an ordinary chat and would rewrite nearly every reply. A blueprint may list any.
GATE_DETECTORS = ("circular_reasoning", "high_conflict", "topic_drift", "persona_collapse")


@dataclass(frozen=True)
class GateConfig:
    """The `observer:` block: the detectors' window and first turn, and which detectors run."""

    window: int = 10
    min_turn: int = 3
    detectors: tuple[str, ...] = GATE_DETECTORS

    def params(self) -> dict[str, Any]:
        return {"window": self.window, "min_turn": self.min_turn}


def gate_config(block: Mapping[str, Any] | None) -> GateConfig | None:
    """The gate's settings from a blueprint's `observer:` block; None when there is no gate."""
    if not isinstance(block, Mapping) or block.get("gate") is False:
        return None
    detectors = block.get("detectors")
    return GateConfig(
        window=int(block.get("window", 10)),
        min_turn=int(block.get("min_turn", 3)),
        detectors=tuple(detectors) if isinstance(detectors, list) else GATE_DETECTORS,
    )


@dataclass(frozen=True)
class Verdict:
    """What the gate found: the detector that fired (its reason), its instruction to the
    model, and the draft it read."""

    reason: str
    instruction: str
    draft: str

    def note(self) -> str:
        """The rewrite request that goes into the second run's system prompt."""
        draft = " ".join(self.draft.split())[:DRAFT_CHARS]
        return REWRITE.format(reason=self.reason.replace("_", " "), instruction=self.instruction, draft=draft)


def transcript(history: Sequence[HistoryTurn], user: str, text: str, soul: str, draft: str) -> list[dict[str, str]]:
    """The conversation as the detectors read it: each history turn's two lines, then this
    message and the draft."""
    lines: list[dict[str, str]] = []
    for turn in history:
        if turn.text:
            lines.append({"speaker": turn.user or user, "text": turn.text})
        if turn.reply:
            lines.append({"speaker": soul, "text": turn.reply})
    lines.append({"speaker": user, "text": text})
    lines.append({"speaker": soul, "text": draft})
    return lines


def fixy_kind() -> Any:
    """The `fixy` step kind (its detectors and trim), from the registry: the runtime does
    not import the steps."""
    from soul.kinds import default_registry

    kind = default_registry().get("fixy")
    if kind is None:
        raise RunError("the `fixy` step kind is not registered; is soulgraph installed whole?")
    return kind


def judge(config: GateConfig, lines: Sequence[Mapping[str, str]]) -> Verdict | None:
    """Fixy's first detector that fires on `lines` (the draft last), or None."""
    found = fixy_kind().detect(list(lines), len(lines), config.params(), order=config.detectors)
    if found is None:
        return None
    return Verdict(str(found.reason), str(found.instruction), str(lines[-1]["text"]))


class HeldEvents:
    """An emitter that holds a draft's events until the gate has decided."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def release(self, emit: Callable[[Any], None] | None) -> None:
        if emit is not None:
            for event in self.events:
                emit(event)
        self.events.clear()


async def gate_reply(plan: Plan, services: Services, session: str, order: Sequence[str], gate: GateConfig, ts: TurnState,
                    snapshot: Snapshot, text: str, held: HeldEvents, emit: Callable[[Any], None] | None,
                    ) -> tuple[TurnState, dict[str, Any] | None]:
    """The observer's gate on a user turn's draft (`session` is its id, `order` the plan's step
    order, `held` the draft's events): the draft is judged by Fixy's detectors;
    when one fires the turn runs once more with the rewrite request, and the rewrite is
    what is sent unless it fails, when the draft stands. Returns the turn state to commit
    and the gate's record for the trace (None when nothing fired)."""
    draft = reply_of(ts, order)
    lines = transcript(ts.ctx.history, ts.ctx.user, text, plan.blueprint.name, draft)
    verdict = judge(gate, lines) if draft.strip() else None
    if verdict is None:
        held.release(emit)
        return ts, None
    retry = start_turn(plan, services, snapshot, text, "message", session=session)
    retry.ctx = retry.ctx.changed(mind=ts.ctx.mind, revise=verdict.note(), persona=ts.ctx.persona)
    again = HeldEvents()
    error: str | None = None
    try:
        await ScopeRunner(plan, plan.turn, services, again).run(retry)
        if not reply_of(retry, order).strip():
            error = "the rewrite was empty"
    except SoulError as exc:  # the model or a step failed: the draft stands
        error = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        log.warning("session %s: the observer's rewrite failed (%s); the draft is sent", session, error)
    rewritten = error is None
    (again if rewritten else held).release(emit)
    if emit is not None:
        emit(FixyGated(ts.ctx.number, plan.blueprint.name, verdict.reason, rewritten, error))
    record = {"event": "fixy_gate", "reason": verdict.reason, "rewritten": rewritten, "error": error}
    return (retry if rewritten else ts), record
