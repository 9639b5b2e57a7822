"""Running souls: `load()` → `Soul` → `Session` → turns. This is the runtime's front door:
others import it from here, never from its parts.

The runtime is grouped by concern, each a subpackage entered through its own `__init__`:
- `turn/`: one pass of a plan over a snapshot and an input (services, context, runner,
  gates, calls, prompt, commit, Fixy's gate on a reply);
- `conversation/`: how a long conversation stays in each model's window (history, budget,
  folding into summaries);
- `background/`: the background mind (mind, processes, cycles, triggers);
- `durable/`: cycles and triggers as DBOS workflows in workers, takeover, and hearing other
  processes' commits;
- `dialogue/`: a blueprint's `dialogue:` run as several souls;
- `tools/`: the blueprint's Python tools and the tool loop;
- `bridges/`: the only code that touches the engines (Chetana, resonance memory, learning
  from use, Entelgia's dialogue engine).
At the top only what ties them together — `session` (a conversation: turns, its background
mind, the observer gate), `souls` (a compiled soul and its services), `dry_run` (`explain`)
— and the shared vocabulary: `events`, `untrusted` (outside text made inert in prompts) and
`surrogates` (outside text made storable). Who may import whom is data in tests/test_layers.py
(RUNTIME_MAY_IMPORT).
"""

from soul.runtime.background import runner_choice
from soul.runtime.bridges import (
    MemoryBridge,
    MemoryReader,
    field_errors,
    field_files,
    restore_field,
    session_report,
)
from soul.runtime.conversation import call_window, turn_window
from soul.runtime.dialogue import DialogueResult, DialogueRunner, dialogues_dir
from soul.runtime.dry_run import ExplainedCall, count_tokens, dry_services, explain, render
from soul.runtime.durable import (
    CommitFeed,
    Heard,
    commit_events,
    feed_for,
    parse_rate,
    refresh_minds,
    system_database_url,
)
from soul.runtime.durable import Engine as DurableEngine
from soul.runtime.durable import Heartbeat as DurableHeartbeat
from soul.runtime.durable import Worker as DurableWorker
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
from soul.runtime.session import Session
from soul.runtime.souls import Soul, load
from soul.runtime.turn import Services, services_for

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
    "call_window",
    "commit_events",
    "count_tokens",
    "dialogues_dir",
    "dry_services",
    "explain",
    "feed_for",
    "field_errors",
    "field_files",
    "load",
    "parse_rate",
    "refresh_minds",
    "render",
    "restore_field",
    "runner_choice",
    "services_for",
    "session_report",
    "system_database_url",
    "turn_window",
]
