"""What a turn gives back: stream events while it runs, and the TurnResult at the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from keyword import iskeyword
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
    """The text that reaches the user; `spontaneous` when no user message asked for it (a
    trigger fired: an S_loud impulse, an idle timer, a schedule)."""

    text: str
    spontaneous: bool = False


@dataclass(frozen=True)
class TurnCommitted:
    session_id: str
    turn: int


@dataclass(frozen=True)
class SubprocessFinished:
    name: str
    committed: bool


@dataclass(frozen=True)
class CycleStarted:
    """A background process (the subconscious) began cycle `cycle`."""

    process: str
    cycle: int


@dataclass(frozen=True)
class CycleFinished:
    """A cycle ended: `outputs` per step when it ran, `error` (a one-line message) when it
    failed; `retry_in` is the backoff before the next attempt (0 when it ran)."""

    process: str
    cycle: int
    outputs: dict[str, dict[str, Any]]
    error: str | None = None
    retry_in: float = 0.0


@dataclass(frozen=True)
class ImpulseQueued:
    """An S_loud impulse waits for a spontaneous turn (or the next user message)."""

    process: str
    cycle: int
    text: str
    trigger: bool
    pending: int  # impulses queued now, this one included


@dataclass(frozen=True)
class MoodChanged:
    """The subconscious set a new mood and criteria (non-empty values overwrite the old)."""

    process: str
    cycle: int
    mood: str
    criteria: str


@dataclass(frozen=True)
class LoopStatus:
    """A background process changed state: running, paused, backing_off, stopped."""

    process: str
    status: str
    cycle: int


@dataclass(frozen=True)
class TriggerFired:
    """A trigger started a spontaneous turn: `reason` says why (trigger, batch_max,
    batch_seconds, idle, schedule); `impulses` the S_loud texts it drains."""

    trigger: str
    reason: str
    impulses: tuple[str, ...] = ()



# -- dialogues (`soul dialogue`, runtime/dialogue/runner.py): plain data, `to_dict()` is JSON-ready --

@dataclass(frozen=True)
class DialogueTurn:
    """A turn of a dialogue: who spoke, what, under which topic and seed strategy; `energy`
    is the speaker's after the turn; `flags` name what happened beside it (hallucination_risk,
    rewritten, dream) and `marks` are the transcript's [SLIP] / [SELF-REPL] lines; `emotion`
    and `intensity` are the turn's (the rules' lexicon), `conflict` the speaker's conflict
    index after it (None on Fixy's turns)."""

    turn: int
    speaker: str
    text: str
    topic: str = ""
    seed_strategy: str | None = None
    energy: float | None = None
    fixy: bool = False
    flags: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()
    emotion: str | None = None
    intensity: float | None = None
    conflict: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FixyIntervened:
    """The observer spoke: the detector that fired (`reason`), its numbers, and the text."""

    turn: int
    reason: str
    evidence: dict[str, Any]
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FixyGated:
    """The observer saw a reply before it joined the dialogue and asked for one rewrite;
    `rewritten` is False when the rewrite failed and the original stood."""

    turn: int
    speaker: str
    reason: str
    rewritten: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DreamCycle:
    """An agent dreamt after turn `turn`: what moved (the engine's dream report) and its
    energy before the recharge."""

    turn: int
    agent: str
    energy_before: float
    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MetricsUpdated:
    """The dialogue's evaluation signals after turn `turn` (the engine's metrics, as a dict)."""

    turn: int
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Event = (
    StepStarted | Token | StepFinished | Reply | TurnCommitted | SubprocessFinished
    | CycleStarted | CycleFinished | ImpulseQueued | MoodChanged | LoopStatus | TriggerFired
    | DialogueTurn | FixyIntervened | FixyGated | DreamCycle | MetricsUpdated
)


# Trace records are built on the hot path of every call; they are never changed after, but a
# frozen dataclass pays an object.__setattr__ per field, so these are plain dataclasses (not
# slotted: the store encodes a trace with orjson, which reads a plain dataclass's __dict__
# several times faster than a slotted one's fields).
@dataclass
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
    # the call's token budget (window, reserve, counter, fixed, used, parts) and what did not
    # fit or was over a region's limit (`runtime/conversation/budget.py`); None for calls made without one
    budget: dict[str, Any] | None = None
    cut: tuple[dict[str, Any], ...] = ()
    # the tools the call ran (runtime/tools/loop.py): tool, arguments, result, error, ms, source
    tools: tuple[dict[str, Any], ...] = ()
    # prompt tokens read from / written to the provider's prompt cache (not in input_tokens)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # where each part of the prompt lies in `messages` (runtime/conversation/layout.py), read
    # back as the call's context window (runtime/conversation/window.py); None: not recorded
    window: dict[str, Any] | None = None
    # what the call cost: {"usd" (None: unknown), "model" (the price table's key), "date",
    # "source", "per_million"} (soul.providers.call_cost); None for calls made without prices
    cost: dict[str, Any] | None = None


@dataclass
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
        """As `dataclasses.asdict` makes it, without its deep copy of every value (a trace holds
        each call's prompt; it is built once per turn, for the commit): ~3x faster."""
        return as_data(self)  # type: ignore[no-any-return]

    def summary(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "calls": len(self.calls),
            "input_tokens": sum(c.input_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "cache_read_tokens": sum(c.cache_read_tokens for c in self.calls),
            "cache_write_tokens": sum(c.cache_write_tokens for c in self.calls),
            "cost": _cost(self.calls),
            "total_ms": round(self.total_ms, 3),
            "framework_ms": round(self.framework_ms, 3),
            "steps": {s.step: s.status for s in self.steps},
        }


def _cost(calls: tuple[CallTrace, ...]) -> dict[str, Any]:
    from soul.providers import traces_total

    return traces_total([{"calls": [{"cost": c.cost} for c in calls]}]).to_dict()


def as_data(value: Any) -> Any:
    """`asdict`'s conversion (dataclasses to dicts, in lists, tuples and dicts) with the
    other values shared, not deep-copied: they are strings, numbers and plain data (a trace
    and every event a server sends, per streamed token, go through it). The usual types are
    told by their exact type first, a plain value inside a container without a call (most of
    a trace's ~500 values are), and each dataclass is converted by code made for its fields
    once (`_converter`)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {k: v if type(v) in _PLAIN else as_data(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _PLAIN else as_data(v) for v in value]
    if kind is tuple:
        if not value:  # most of a trace's tuples (flags, repairs, tool calls): kept, as they cannot change
            return value
        return tuple([v if type(v) in _PLAIN else as_data(v) for v in value])
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        return convert(value)
    return _as_data(value)


_PLAIN = frozenset({str, int, float, bool, type(None)})
_CONVERTERS: dict[type, Callable[[Any], dict[str, Any]]] = {}  # per dataclass met: its `as_data`


def _converter(names: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """A dataclass's conversion as one dict display reading each field by name, made once per
    class as `dataclasses` makes its `__init__` (field names are identifiers): a trace's ~25
    dataclasses (its calls' messages, its steps) convert ~1/3 faster than by a comprehension
    calling `getattr` per field."""
    if not all(name.isidentifier() and not iskeyword(name) for name in names):  # not a class's own fields
        return lambda value: {name: as_data(getattr(value, name)) for name in names}
    # a plain value, or the empty tuple (most of a trace's tuples: flags, tool calls; one object in CPython,
    # and any other empty tuple is converted to an equal one), is kept
    body = ", ".join(f"{name!r}: v if type(v := value.{name}) in _PLAIN or v is _EMPTY else as_data(v)" for name in names)
    scope: dict[str, Any] = {"_PLAIN": _PLAIN, "_EMPTY": (), "as_data": as_data}
    exec(f"def convert(value):\n    return {{{body}}}", scope)  # code made from field names (identifiers) only
    return scope["convert"]  # type: ignore[no-any-return]


def _as_data(value: Any) -> Any:
    """`as_data` for subclasses of the plain types, named tuples, and a dataclass met first."""
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, dict):
        return {k: as_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):  # subclasses too, rebuilt as `asdict` rebuilds them
        items = [as_data(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in fields(value))
        if len(_CONVERTERS) < 1024:
            _CONVERTERS[type(value)] = _converter(names)
        return {name: as_data(getattr(value, name)) for name in names}
    return value


@dataclass(frozen=True)
class TurnResult:
    """The outcome of one turn: the reply, each step's parsed outputs, and the trace."""

    reply: str
    session_id: str
    turn: int
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    trace: Trace | None = None
    kind: str = "message"  # message | spontaneous

    def to_json(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "kind": self.kind,
            "session": self.session_id,
            "turn": self.turn,
            "steps": self.steps,
            "trace": self.trace.summary() if self.trace else None,
        }
