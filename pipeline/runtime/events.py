"""What a turn gives back: stream events while it runs, and the TurnResult at the end."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class StepStarted:
    step: str
    kind: str


@dataclass(frozen=True)
class Token:
    """A piece of a streamed step's text (only `stream: true` steps ever emit these)."""

    step: str
    text: str


@dataclass(frozen=True)
class StepFinished:
    step: str
    outputs: dict[str, Any]
    ok: bool


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class TurnCommitted:
    session_id: str
    turn: int


@dataclass(frozen=True)
class SubprocessFinished:
    name: str
    committed: bool


Event = StepStarted | Token | StepFinished | Reply | TurnCommitted | SubprocessFinished


# Trace records are built on the hot path of every call; they are never changed after,
# but a frozen dataclass pays an object.__setattr__ per field, so these use slots instead.
@dataclass(slots=True)
class CallTrace:
    """One model call: what was sent, what came back, how it was read."""

    unit: int
    model: str
    steps: tuple[str, ...]
    messages: tuple[Any, ...]  # soul.providers.base.Message; plain dicts once the trace is stored
    raw: str
    attempts: int
    input_tokens: int
    output_tokens: int
    latency_ms: float
    repairs: tuple[str, ...] = ()
    reasks: tuple[str, ...] = ()


@dataclass(slots=True)
class StepTrace:
    step: str
    kind: str
    status: str  # ran | skipped | gated | fallback | failed
    outputs: dict[str, Any]
    flags: tuple[str, ...] = ()
    gate: str | None = None
    ms: float = 0.0


@dataclass(frozen=True)
class Trace:
    """Everything a turn did, JSON-safe via `to_dict`."""

    turn: int
    kind: str
    input: str
    steps: tuple[StepTrace, ...] = ()
    calls: tuple[CallTrace, ...] = ()
    framework_ms: float = 0.0
    total_ms: float = 0.0
    events: tuple[dict[str, Any], ...] = ()  # engine events (Chetana), in order

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "calls": len(self.calls),
            "input_tokens": sum(c.input_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "total_ms": round(self.total_ms, 3),
            "framework_ms": round(self.framework_ms, 3),
            "steps": {s.step: s.status for s in self.steps},
        }


@dataclass(frozen=True)
class TurnResult:
    """The outcome of one turn: the reply, each step's parsed outputs, and the trace."""

    reply: str
    session_id: str
    turn: int
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    trace: Trace | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "session": self.session_id,
            "turn": self.turn,
            "steps": self.steps,
            "trace": self.trace.summary() if self.trace else None,
        }
