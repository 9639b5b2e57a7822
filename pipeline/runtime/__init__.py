"""Running souls: `load()` → `Soul` → `Session` → turns. A turn runs the plan's units layer by
layer (model calls through the providers, non-LLM steps through their kinds), gathers every
step's changes into one Commit for the store, and streams events as it goes. The only modules
that touch the engines are the bridges `runtime/chetana.py` and `runtime/memory.py`."""

from soul.runtime.chetana import session_report
from soul.runtime.dry_run import ExplainedCall, count_tokens, explain, render
from soul.runtime.events import (
    CallTrace,
    Reply,
    StepFinished,
    StepStarted,
    StepTrace,
    SubprocessFinished,
    Token,
    Trace,
    TurnCommitted,
    TurnResult,
)
from soul.runtime.session import Session
from soul.runtime.souls import Soul, load

__all__ = [
    "CallTrace",
    "ExplainedCall",
    "Reply",
    "Session",
    "Soul",
    "StepFinished",
    "StepStarted",
    "StepTrace",
    "SubprocessFinished",
    "Token",
    "Trace",
    "TurnCommitted",
    "TurnResult",
    "count_tokens",
    "explain",
    "load",
    "render",
    "session_report",
]
