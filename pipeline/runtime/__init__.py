"""Running souls: `load()` → `Soul` → `Session` → turns. A turn runs from the plan and its
`Services` (prompt builder, gate evaluator, providers, memory bridge, Chetana's starter): the
plan's units layer by layer (model calls through the providers, non-LLM steps through their
kinds), every step's changes gathered into one Commit for the store, events streamed as it
goes. `explain` is a dry run of the same turn code. The only modules that touch the engines are
the bridges `runtime/chetana.py`, `runtime/memory.py` and `runtime/dialogue_engine.py`.
`DialogueRunner` runs a blueprint's `dialogue:`: one soul per agent, turn by turn.

Modules import only those before them: events, prompt, gates, calls, eager, the bridges
chetana and memory → services → turn → session → souls; the dry run builds on turn.
"""

from soul.runtime.chetana import session_report
from soul.runtime.commit_feed import CommitFeed, Heard, commit_events, feed_for, refresh_minds
from soul.runtime.dialogue import DialogueRunner
from soul.runtime.dialogue_store import DialogueResult, dialogues_dir
from soul.runtime.dry_run import ExplainedCall, count_tokens, dry_services, explain, render
from soul.runtime.durable import Engine as DurableEngine
from soul.runtime.durable import parse_rate, system_database_url
from soul.runtime.durable_recovery import Heartbeat as DurableHeartbeat
from soul.runtime.durable_worker import Worker as DurableWorker
from soul.runtime.events import (
    CallTrace,
    CycleFinished,
    CycleStarted,
    DialogueTurn,
    DreamCycle,
    FixyGated,
    FixyIntervened,
    ImpulseQueued,
    LoopStatus,
    MetricsUpdated,
    MoodChanged,
    Reply,
    StepFinished,
    StepStarted,
    StepTrace,
    SubprocessFinished,
    Token,
    Trace,
    TriggerFired,
    TurnCommitted,
    TurnResult,
    as_data,
)
from soul.runtime.memory import MemoryBridge, MemoryReader, field_errors
from soul.runtime.processes import runner_choice
from soul.runtime.services import Services, services_for
from soul.runtime.session import Session
from soul.runtime.souls import Soul, load

__all__ = [
    "CallTrace",
    "CommitFeed",
    "CycleFinished",
    "CycleStarted",
    "DialogueResult",
    "DialogueRunner",
    "DialogueTurn",
    "DreamCycle",
    "DurableEngine",
    "DurableHeartbeat",
    "DurableWorker",
    "ExplainedCall",
    "FixyGated",
    "FixyIntervened",
    "Heard",
    "ImpulseQueued",
    "LoopStatus",
    "MemoryBridge",
    "MemoryReader",
    "MetricsUpdated",
    "MoodChanged",
    "Reply",
    "Services",
    "Session",
    "Soul",
    "StepFinished",
    "StepStarted",
    "StepTrace",
    "SubprocessFinished",
    "Token",
    "Trace",
    "TriggerFired",
    "TurnCommitted",
    "TurnResult",
    "as_data",
    "commit_events",
    "count_tokens",
    "dialogues_dir",
    "dry_services",
    "explain",
    "feed_for",
    "field_errors",
    "load",
    "parse_rate",
    "refresh_minds",
    "render",
    "runner_choice",
    "services_for",
    "session_report",
    "system_database_url",
]
