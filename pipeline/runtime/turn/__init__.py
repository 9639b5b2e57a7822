"""The turn itself: one pass of a plan over a session snapshot and an input.

`services` binds a plan to what runs it (prompt builder, gate evaluator, providers, the
bridges, tools); `context` is what a turn starts from and gathers (`TurnContext`,
`TurnState`); `runner` runs the plan's units layer by layer (`ScopeRunner`), asking
`gates` which steps run and `calls` to make each model call (`prompt` builds its messages,
`eager` starts a layer's units together, `not_run` is how a step that did not run reads);
`commit` gathers the turn's changes into the one `Commit` the store applies; `observer` is
Fixy's gate on a reply. The turn knows nothing of the background mind, durable execution
or dialogues: they call it.
"""

from soul.runtime.turn.calls import CallOutcome
from soul.runtime.turn.commit import build_commit, memory_items, reply_of
from soul.runtime.turn.context import TurnState, busy_seconds, context_for, start_turn
from soul.runtime.turn.observer import (
    GateConfig,
    HeldEvents,
    fixy_kind,
    gate_config,
    gate_reply,
    judge,
    transcript,
)
from soul.runtime.turn.prompting.fitting import Prompt
from soul.runtime.turn.runner import GatedOff, ScopeRunner, Seen
from soul.runtime.turn.services import Services, services_for

__all__ = [
    "CallOutcome",
    "GateConfig",
    "GatedOff",
    "HeldEvents",
    "Prompt",
    "ScopeRunner",
    "Seen",
    "Services",
    "TurnState",
    "build_commit",
    "busy_seconds",
    "context_for",
    "fixy_kind",
    "gate_config",
    "gate_reply",
    "judge",
    "memory_items",
    "reply_of",
    "services_for",
    "start_turn",
    "transcript",
]
