"""Records: the plain data a turn produces and the session store keeps.

The runtime builds a `Commit` from a finished turn; the store applies it in one transaction.
Everything here is immutable and JSON-friendly, so commits can be logged, traced and compared.
The records a turn builds for every step (`MessageRecord`, `MemoryEntry`) are slotted
dataclasses, not frozen ones — treat them as immutable: a frozen dataclass's `__init__` sets
each field through `object.__setattr__` (or, as these did, writes the instance's `__dict__`),
which costs twice what slot stores do, and a chained step builds two of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Layer = Literal["external", "internal", "subconscious", "system"]


# Not frozen: built for every step (see the module's docstring); treat it as immutable.
@dataclass(slots=True, init=False)
class MessageRecord:
    """One line of the conversation as stored: who/which layer, which tag, what was said."""

    layer: Layer  # external: what the user and the soul said aloud; internal: thoughts, checks
    tag: str  # user | external_dialogue | internal_monologue | user_model_check | ...
    content: str
    step: str | None = None  # the step that produced it (None for the user's message)
    verb: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __init__(self, layer: Layer, tag: str, content: str, step: str | None = None, verb: str | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        self.layer = layer
        self.tag = tag
        self.content = content
        self.step = step
        self.verb = verb
        self.meta = {} if meta is None else meta


# Not frozen: built for every step (see the module's docstring); treat it as immutable.
@dataclass(slots=True, init=False)
class MemoryEntry:
    """A working-memory entry (the Claudius seed's thread entries)."""

    region: str
    entry_type: str  # internalMonologue | externalDialog | mentalQuery | userMessage | ...
    content: str
    verb: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __init__(self, region: str, entry_type: str, content: str, verb: str | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        self.region = region
        self.entry_type = entry_type
        self.content = content
        self.verb = verb
        self.meta = {} if meta is None else meta


@dataclass(frozen=True)
class UserModelChange:
    """A new version of the markdown user model, with the note on what changed."""

    text: str
    note: str
    step: str | None = None


@dataclass(frozen=True)
class MoodRecord:
    """Mood and criteria as the subconscious set them (AgentCSD's M_AND_C)."""

    mood: str
    criteria: str


@dataclass(frozen=True)
class SummaryRecord:
    """A history folded into a summary: "[Previous summary]: ..." plus the recent entries.

    `layer` names the history (S_loud_history, S_quiet_history, ID_quiet_history, ...);
    `cycle_from`..`cycle_to` the cycles its summarised entries came from; `digest` is True
    when the summary call failed and a truncation digest stands in for it."""

    layer: str
    summary: str
    cycle_from: int
    cycle_to: int
    digest: bool = False


@dataclass(frozen=True)
class Fence:
    """The lease a commit is made under: the (soul, user) memory partition, its owner and
    the lease's epoch. The store refuses the commit (`LeaseLost`) unless the lease still has
    this owner and this epoch (docs/scale.md, "Memory fields at scale")."""

    soul: str
    user: str
    owner: str
    epoch: int


@dataclass(frozen=True)
class Commit:
    """Everything one turn changes, applied atomically by the store.

    `base_turn` is the session's turn count the turn started from: the store refuses a commit
    whose base is stale (another process committed a turn meanwhile), so two writers can never
    interleave half-turns.

    Its data is handed over with it: nothing changes its records, dicts and lists once it is
    applied (the store gives its `chetana`, messages and memory entries back, the same objects,
    in the session's next snapshot), and it is JSON data (dicts with string keys, lists, strings,
    numbers, booleans, None): what the store writes and reads back.
    """

    session_id: str
    base_turn: int
    messages: tuple[MessageRecord, ...] = ()
    state: dict[str, Any] | None = None  # the full new state (None: unchanged)
    user_model: UserModelChange | None = None
    memory: tuple[MemoryEntry, ...] = ()
    chetana: dict[str, Any] | None = None  # the serialised Chetana controller (None: unchanged)
    # the turn's trace: JSON data, or a dataclass of JSON data with a `to_dict()` (a turn's
    # `soul.runtime.Trace`, whose fields the store encodes as they stand: `soul.store.logs.dumps_fields`)
    trace: dict[str, Any] | Any = field(default_factory=dict)
    kind: Literal["message", "spontaneous", "subprocess", "cycle"] = "message"
    # A background process's cycle (kind "cycle"), or the cycle a turn saw (None: no process)
    process: str | None = None
    cycle: int | None = None
    mood: MoodRecord | None = None  # a new mood & criteria (kind "cycle")
    summaries: tuple[SummaryRecord, ...] = ()
    # What the turn writes to the memory field once committed, kept with it so the field can
    # be rebuilt from the store (None: nothing recorded; a commit of a soul without memory)
    remember: tuple[dict[str, Any], ...] | None = None
    fence: Fence | None = None  # a partitioned memory field's lease (None: no lease checked)

    @property
    def turn(self) -> int:
        """The turn number this commit creates (subprocess and cycle commits do not advance
        it; a cycle runs beside the turns, so the store stamps it with the turn count then)."""
        return self.base_turn if self.kind in ("subprocess", "cycle") else self.base_turn + 1


@dataclass(frozen=True)
class SessionInfo:
    """A session as listed."""

    id: str
    soul: str
    user: str
    turns: int
    created: float
    updated: float
    blueprint: str = ""
    forked_from: str | None = None  # the session this one was forked from (`soul sessions fork`)
    forked_at: int | None = None  # the turn of that session it starts after


@dataclass(frozen=True)
class Snapshot:
    """What a turn starts from: the session's stores as of its last commit."""

    session: SessionInfo
    state: dict[str, Any]
    user_model: str
    user_model_version: int
    memory: tuple[MemoryEntry, ...]
    recent: tuple[MessageRecord, ...]  # the last messages, oldest first
    chetana: dict[str, Any] | None
    last_user_model_check: bool | None  # the Samantha-Dreams gate: None before any check


@dataclass(frozen=True)
class UserModelVersion:
    version: int
    text: str
    note: str
    session_id: str | None
    turn: int | None
    created: float
