"""What a turn starts from and gathers as it runs: the `TurnContext` a prompt is built from
(the input and the soul's stores as they are now, from a session snapshot) and the `TurnState`
that accumulates the turn's outputs, traces and changes (private to one turn)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from soul.compiler import Plan
from soul.kinds import Changes
from soul.records import MemoryEntry, Snapshot, SummaryRecord
from soul.runtime.bridges import Cognition, Kept
from soul.runtime.conversation import ConversationSummary, HistoryTurn
from soul.runtime.events import StepTrace
from soul.runtime.turn.memory_reading import memory_reading


@dataclass(frozen=True)
class TurnContext:
    """What a prompt is built from: the turn's input and the soul's stores as they are now."""

    text: str
    user: str = "user"
    kind: str = "message"  # message | spontaneous
    number: int = 1
    state: Mapping[str, Any] = field(default_factory=dict)
    user_model: str = ""
    inject_user_model: bool = True
    memory: Mapping[str, Sequence[str]] = field(default_factory=dict)
    chetana: Mapping[str, Any] | None = None
    steps: Mapping[str, Any] = field(default_factory=dict)
    # A background process's system prompt (its Persona Core snapshot), replacing the persona
    persona: str | None = None
    # What the turn or cycle shares with a background process (`runtime/mind.py`): a turn's
    # mood, criteria, impulses and quiet history; a cycle's changes and histories
    mind: Mapping[str, Any] | None = None
    # Working memory as labelled entries by region (history and summary entries left out);
    # `memory` holds their texts for templates
    entries: Mapping[str, tuple[MemoryEntry, ...]] = field(default_factory=dict)
    history: tuple[HistoryTurn, ...] = ()  # the turns after the summary, oldest first
    summary: ConversationSummary | None = None
    revise: str | None = None  # the observer's rewrite request, when its gate asked for one
    # What the turn's calls work out once and share (the prompt's views of the history and of
    # working memory: `turn/prompting/fitting.py`). Made with the context, carried by `replace`, so it
    # lives exactly as long as the turn; never compared, never shown.
    shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def changed(self, **fields: Any) -> TurnContext:
        """`dataclasses.replace(self, **fields)` at a sixth of its cost (a turn makes several,
        and a gate's variables one per check): the same fields, `shared` carried alike."""
        if not _FIELDS.issuperset(fields):
            unknown = ", ".join(sorted(set(fields) - _FIELDS))
            raise TypeError(f"TurnContext has no field {unknown}")
        new = object.__new__(TurnContext)
        values = new.__dict__
        values.update(self.__dict__)
        values.update(fields)
        return new


_FIELDS = frozenset(TurnContext.__dataclass_fields__)


@dataclass(slots=True, init=False)
class TurnState:
    """What accumulates while a turn runs (private to one turn). Made on every turn: its own
    `__init__` starts each collection empty, where a dataclass's would test each for a
    default factory first (twice the work, and a turn made per run of the graph)."""

    ctx: TurnContext
    outputs: dict[str, dict[str, Any]]
    steps: list[StepTrace]
    calls: list[Any]
    changes: dict[str, Changes]
    provider_spans: list[tuple[float, float]]  # (start, end) of each model call
    cognition: Cognition | None
    done: dict[str, dict[str, Any]]  # outputs of the steps that produced some, in plan order
    reach: int  # the place in plan order of the latest step in `done` (runner.py: `_did`)
    session: str | None  # the session's id, for engines that prime by session
    # The next four are rare (a recall step, a call that cut the history, a fold): each starts
    # as the shared empty tuple and becomes the turn's own list when first added to
    # (`recalling`, `showed`; `conversation/folding.py` adds a fold's records), not four
    # lists made and freed on every run of the graph.
    recalled: Sequence[str]  # memory ids recalled: touched after the commit
    shown: Sequence[int]  # turns of history each call that cut the history showed
    whole: bool  # a call showed every turn of the history (the turn does not fold)
    summaries: Sequence[SummaryRecord]  # history folded this turn
    folded: Sequence[MemoryEntry]  # the summary's working-memory entry
    # the kind of each step whose changes hold working memory: its entries are labelled with
    # the step, kind and turn as the commit gathers them (`turn/commit.py`)
    labels: dict[str, str]

    def __init__(self, ctx: TurnContext, outputs: dict[str, dict[str, Any]], *, done: dict[str, dict[str, Any]] | None = None,
                 session: str | None = None, cognition: Cognition | None = None) -> None:
        self.ctx = ctx
        self.outputs = outputs
        self.done = {} if done is None else done
        self.reach = -1 if done is None else 1 << 30  # a copy's order is unknown: the next step checks it
        self.session = session
        self.cognition = cognition
        self.steps = []
        self.calls = []
        self.changes = {}
        self.provider_spans = []
        self.recalled = ()
        self.shown = ()
        self.whole = False
        self.summaries = ()
        self.folded = ()
        self.labels = {}

    def recalling(self) -> list[str]:
        """The list a memory reader adds the ids it recalls to (made on the turn's first recall)."""
        recalled = self.recalled
        if type(recalled) is not list:
            recalled = self.recalled = list(recalled)
        return recalled

    def showed(self, turns: int) -> None:
        """A call that cut the history showed `turns` of its turns (`fold_history` reads them)."""
        self.shown = [*self.shown, turns]


def context_for(plan: Plan, snapshot: Snapshot, text: str, kind: str) -> TurnContext:
    """The TurnContext a turn starts from."""
    number = snapshot.session.turns + 1
    state = plan.initial_state(snapshot.state)
    # Samantha-Dreams: the user model goes in on the first turn, then only after a true check
    inject = snapshot.session.turns == 0 or snapshot.last_user_model_check is True
    # what the session's last turn read of its working memory, read on by what was added since
    reading = memory_reading(snapshot.session.id, snapshot.memory, snapshot.session.user)
    entries = dict(reading.regions)
    history, summary = reading.turns() if kind != "cycle" else ((), None)
    return TurnContext(
        text=text,
        user=snapshot.session.user,
        kind=kind,
        number=number,
        state=state,
        user_model=snapshot.user_model,
        inject_user_model=inject,
        memory={region: list(texts) for region, texts in reading.texts.items()},
        entries=entries,
        history=history,
        summary=summary,
    )


class Starting(Protocol):
    """What starting a turn needs of its services (`Services` is one): Chetana's starter, if any."""

    @property
    def chetana(self) -> Callable[[Mapping[str, Any] | None, str, Kept | None], Cognition] | None: ...


def start_turn(plan: Plan, services: Starting, snapshot: Snapshot, text: str, kind: str, session: str | None = None,
               kept: Kept | None = None) -> TurnState:
    """The state a turn starts from: its context, and Chetana's controller begun on the input
    when the services carry Chetana (the context then holds what templates see as `chetana`;
    `kept`: the controller the session's last turn ended with, `Cognition.begin`)."""
    ts = TurnState(context_for(plan, snapshot, text, kind), {}, session=session)
    if services.chetana is not None:
        ts.cognition = services.chetana(snapshot.chetana, text, kept)
        ts.ctx = ts.ctx.changed(chetana=ts.cognition.context)
    return ts


def busy_seconds(spans: Sequence[tuple[float, float]]) -> float:
    """The length of the union of `spans`: calls that overlap (a layer's units run
    concurrently) count once, so wall time minus this is never negative."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
