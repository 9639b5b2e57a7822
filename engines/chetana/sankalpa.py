"""Sankalpa (intention): goals extracted from what the user says, kept across turns with
priority, progress and staleness, so the agent does not forget what it was asked to do."""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any, NamedTuple

from .config import (
    SYSTEM_MAX_EVIDENCE,
    SYSTEM_MAX_INTENTIONS,
    ConfigLike,
    PriorsLike,
)
from .errors import StateError
from .events import GOAL_CHANGED, GOAL_CREATED, EventCallback
from .goals import extract_goals, extract_keywords, fold_word, intention_id, overlap, words
from .pending import NO_GATE
from .state import check_map, check_str, read_float, read_int, read_list, read_str
from .subsystem import Subsystem

__all__ = [
    "DEDUP_THRESHOLD",
    "ESCALATION_CRITICAL",
    "ESCALATION_HIGH",
    "KEYWORD_MATCH_THRESHOLD",
    "PRIORITIES",
    "PROGRESS_INCREMENT",
    "STATUSES",
    "Intention",
    "Sankalpa",
]

DEDUP_THRESHOLD = 0.5  # overlap coefficient at which a goal is a re-mention
ESCALATION_HIGH = 3  # mentions: normal -> high
ESCALATION_CRITICAL = 5  # mentions: high -> critical
KEYWORD_MATCH_THRESHOLD = 2  # goal keywords a tool result must contain to count as progress
PROGRESS_INCREMENT = 0.1
PRIORITIES = ("low", "normal", "high", "critical")
STATUSES = ("active", "paused", "achieved", "abandoned")
# Eviction order: abandoned first, then paused, achieved, active; lower priority first.
_STATUS_RANK = {"abandoned": 0, "paused": 1, "achieved": 2, "active": 3}
_PRIORITY_RANK = {p: i for i, p in enumerate(PRIORITIES)}


class Intention(NamedTuple):
    """A snapshot of one intention."""

    id: str
    goal: str
    priority: str  # low | normal | high | critical
    status: str  # active | paused | achieved | abandoned
    progress: float  # [0, 1]
    created_turn: int  # the original kept wall-clock times; turns keep it deterministic
    last_advanced_turn: int
    evidence: tuple[str, ...]  # tools whose results advanced the goal
    subgoals: tuple[str, ...]
    stale_turns: int  # turns without progress
    mention_count: int


_new_intention = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path


class _Goal:
    """Mutable intention record."""

    __slots__ = (
        "created_turn",
        "evidence",
        "forms",
        "goal",
        "id",
        "keys",
        "last_advanced_turn",
        "mention_count",
        "needed",
        "priority",
        "progress",
        "stale_turns",
        "status",
        "subgoals",
    )

    def __init__(self, goal_id: str, goal: str, turn: int) -> None:
        self.id = goal_id
        self.goal = goal
        self.priority = "normal"
        self.status = "active"
        self.progress = 0.0
        self.created_turn = turn
        self.last_advanced_turn = turn
        self.evidence: tuple[str, ...] = ()  # a tuple: snapshots share it without copying
        self.subgoals: tuple[str, ...] = ()  # a tuple, as evidence
        self.stale_turns = 0
        self.mention_count = 1
        self.keys = extract_keywords(goal)
        # Every word form that plural-folds to one of the keywords, mapped to that keyword.
        self.forms: dict[str, str] = {}
        for base in {fold_word(k) for k in self.keys}:
            self.forms[base + "s"] = base
            if fold_word(base) == base:
                self.forms[base] = base
        self.needed = min(KEYWORD_MATCH_THRESHOLD, len(set(self.forms.values()))) or 1

    def snapshot(self) -> Intention:
        """An immutable copy for readers."""
        return _new_intention(Intention, _snapshot_fields(self))


# The record's fields in Intention's order, read in one C call (a snapshot per active goal
# is taken every turn a context is read).
_snapshot_fields = attrgetter(*Intention._fields)


class Sankalpa(Subsystem):
    """Intention persistence.

    `extract_from_message` creates intentions from intent phrases (a goal whose keywords
    overlap an active or paused one by >= 0.5 is a re-mention: 3 mentions make it high
    priority, 5 critical, and a paused one wakes up). `on_tool_result` advances every active
    goal whose keywords the result contains (2, or all if the goal has fewer) by 0.1.
    `end_turn` counts stale turns: paused at the threshold (15), abandoned at twice that.
    Fires `goal_created` and, on a real status or priority change, `goal_changed`.
    """

    __slots__ = (
        "_evidence_cap",
        "_forms",
        "_gate",
        "_goals",
        "_patience",
        "_turn",
        "on_event",
    )

    def _start(self) -> None:
        self._gate = NO_GATE  # the controller's gate when it runs this subsystem
        self._goals: dict[str, _Goal] = {}
        self._turn = 0
        self._patience = self.priors.patience(self.config.goal_abandonment_threshold)
        self._evidence_cap = min(self.config.max_evidence_per_intention, SYSTEM_MAX_EVIDENCE)
        # Word form -> (active goal, the keyword the form folds to), built when first needed.
        self._forms: dict[str, list[tuple[_Goal, str]]] | None = None

    @property
    def patience(self) -> int:
        """Turns without progress before an active goal is paused (abandoned at twice)."""
        return self._patience

    # --- reading -----------------------------------------------------------------------

    def get_intentions(self) -> list[Intention]:
        """Every intention, whatever its status, oldest first."""
        return [g.snapshot() for g in self._goals.values()]

    def get_active_intentions(self) -> list[Intention]:
        """The active intentions, oldest first."""
        new, fields = _new_intention, _snapshot_fields
        return [new(Intention, fields(g)) for g in self._goals.values() if g.status == "active"]

    def get(self, intention_id: str) -> Intention | None:
        """One intention by id, or None."""
        goal = self._goals.get(intention_id)
        return goal.snapshot() if goal is not None else None

    def count(self, status: str) -> int:
        """How many intentions have this status."""
        return sum(1 for g in self._goals.values() if g.status == status)

    # --- signals -----------------------------------------------------------------------

    def _emit(self, name: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(name, data)

    def extract_from_message(self, message: str) -> list[Intention]:
        """Create intentions from a user message; returns the new ones (not re-mentions)."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        if not message:
            return []
        goals = extract_goals(message)
        if not goals:
            return []
        created: list[Intention] = []
        counted: set[str] = set()  # intentions already mentioned by this message
        for text in goals:
            keys = extract_keywords(text)
            existing = self._find_similar(keys)
            if existing is not None:
                # One mention per message: the original counted "let's fix the bug" twice
                # (once for "let's", once for "fix the") and escalated on the second message.
                if existing.id not in counted:
                    counted.add(existing.id)
                    self._mention(existing)
                continue
            goal_id = intention_id(text)
            self._goals.pop(goal_id, None)  # an achieved/abandoned namesake is replaced
            self._enforce_capacity()
            goal = _Goal(goal_id, text, self._turn)
            self._goals[goal_id] = goal
            self._forms = None
            counted.add(goal_id)
            created.append(goal.snapshot())
            self._emit(GOAL_CREATED, {"id": goal_id, "goal": text})
        return created

    def _find_similar(self, keys: frozenset[str]) -> _Goal | None:
        for goal in self._goals.values():
            if goal.status in ("active", "paused") and overlap(keys, goal.keys) >= DEDUP_THRESHOLD:
                return goal
        return None

    def _mention(self, goal: _Goal) -> None:
        goal.mention_count += 1
        before = goal.priority
        if goal.mention_count >= ESCALATION_CRITICAL and goal.priority == "high":
            goal.priority = "critical"
        elif goal.mention_count >= ESCALATION_HIGH and goal.priority == "normal":
            goal.priority = "high"
        # goal_changed only on a real change: the original also announced "active" for an
        # active goal that was merely mentioned again.
        if goal.status == "paused":
            goal.status = "active"
            goal.stale_turns = 0
            self._forms = None
            self._emit(GOAL_CHANGED, {"id": goal.id, "status": "active"})
        if goal.priority != before:
            self._emit(GOAL_CHANGED, {"id": goal.id, "priority": goal.priority})

    def _enforce_capacity(self) -> None:
        cap = min(self.config.max_intentions, SYSTEM_MAX_INTENTIONS)
        while len(self._goals) >= cap:
            # Lowest status, then lowest priority; among equals the newest goes, as the
            # original's age term kept the longest-held goals.
            victim = min(
                enumerate(self._goals.values()),
                key=lambda item: (
                    _STATUS_RANK[item[1].status],
                    _PRIORITY_RANK[item[1].priority],
                    -item[0],
                ),
            )[1]
            del self._goals[victim.id]
            self._forms = None

    def _form_index(self) -> dict[str, list[tuple[_Goal, str]]]:
        # Word form -> the active goals it belongs to, each with the keyword the form folds
        # to; rebuilt only when goals change.
        if self._forms is None:
            index: dict[str, list[tuple[_Goal, str]]] = {}
            for goal in self._goals.values():
                if goal.status == "active":
                    for form, base in goal.forms.items():
                        index.setdefault(form, []).append((goal, base))
            self._forms = index
        return self._forms

    @property
    def reads_results(self) -> bool:
        """Whether a tool result can advance a goal now: an active goal has keywords it could
        hold (without one, `on_tool_result` changes nothing, whatever the content)."""
        index = self._forms if self._forms is not None else self._form_index()
        return bool(index)

    def on_tool_result(self, tool: str, content: str) -> None:
        """Advance every active goal whose keywords appear as words in the result."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        if not content:
            return
        index = self._forms if self._forms is not None else self._form_index()
        if not index:
            return
        # Whole words (plural-folded), not substrings: the original's substring test let
        # "bug" match "debugging" and "auth" match "oauth".
        hits = index.keys() & words(content)
        if not hits:
            return
        found: dict[_Goal, set[str]] = {}  # goal -> the distinct keywords found
        for form in hits:
            for goal, base in index[form]:
                bases = found.get(goal)
                if bases is None:
                    found[goal] = {base}
                else:
                    bases.add(base)
        cap = self._evidence_cap
        turn = self._turn
        for goal, bases in found.items():  # goals are independent: order cannot matter
            # Goals with a single keyword need that one (the original's fixed 2 meant a goal
            # like "fix the tests" could never progress). "test" and "tests" are one keyword.
            if len(bases) >= goal.needed:
                progress = round(goal.progress + PROGRESS_INCREMENT, 10)
                goal.progress = progress if progress < 1.0 else 1.0
                goal.last_advanced_turn = turn
                goal.stale_turns = 0
                if len(goal.evidence) < cap:
                    goal.evidence += (tool,)

    def end_turn(self) -> None:
        """A turn passed: goals without progress grow stale, then pause, then are abandoned."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        self._turn += 1
        patience = self.patience
        for goal in self._goals.values():
            if goal.status == "active":
                goal.stale_turns += 1
                if goal.stale_turns >= patience:
                    goal.status = "paused"
                    self._forms = None
                    self._emit(GOAL_CHANGED, {"id": goal.id, "status": "paused"})
            elif goal.status == "paused":
                goal.stale_turns += 1
                if goal.stale_turns >= 2 * patience:
                    goal.status = "abandoned"
                    self._emit(GOAL_CHANGED, {"id": goal.id, "status": "abandoned"})

    def achieve(self, intention_id: str) -> bool:
        """Mark an intention achieved (progress 1); False if there is no such intention."""
        if self._gate.ref is not None:  # a context handed out still reads this state
            self._gate.settle()
        goal = self._goals.get(intention_id)
        if goal is None:
            return False
        goal.progress = 1.0
        if goal.status != "achieved":
            goal.status = "achieved"
            self._forms = None
            self._emit(GOAL_CHANGED, {"id": goal.id, "status": "achieved"})
        return True

    # --- persistence -------------------------------------------------------------------

    def serialize(self) -> list[dict[str, Any]]:
        """Every intention as a JSON-safe dict, oldest first."""
        return [
            {
                "id": g.id,
                "goal": g.goal,
                "priority": g.priority,
                "status": g.status,
                "progress": g.progress,
                "created_turn": g.created_turn,
                "last_advanced_turn": g.last_advanced_turn,
                "evidence": list(g.evidence),
                "subgoals": list(g.subgoals),
                "stale_turns": g.stale_turns,
                "mention_count": g.mention_count,
            }
            for g in self._goals.values()
        ]

    @classmethod
    def deserialize(
        cls,
        state: list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...],
        config: ConfigLike = None,
        on_event: EventCallback | None = None,
        priors: PriorsLike = None,
        path: str = "intentions",
        turn: int = 0,
    ) -> Sankalpa:
        """Restore from `serialize()` output; `turn` is the host's turn counter."""
        if not isinstance(state, list | tuple):
            raise StateError(f"{path} must be a list, got {type(state).__name__}")
        sankalpa = cls(config, on_event, priors)
        sankalpa._turn = turn
        for i, data in enumerate(state):
            where = f"{path}[{i}]"
            check_map(data, where)
            goal_id = read_str(data, "id", where)
            if goal_id in sankalpa._goals:
                raise StateError(f"{where}.id {goal_id!r} appears twice")
            goal = _Goal(goal_id, read_str(data, "goal", where), 0)
            goal.priority = read_str(data, "priority", where, PRIORITIES)
            goal.status = read_str(data, "status", where, STATUSES)
            goal.progress = read_float(data, "progress", where, 0.0, 1.0)
            goal.created_turn = read_int(data, "created_turn", where, default=0)
            goal.last_advanced_turn = read_int(data, "last_advanced_turn", where, default=0)
            goal.evidence = tuple(
                check_str(e, f"{where}.evidence[]") for e in read_list(data, "evidence", where)
            )
            goal.subgoals = tuple(
                check_str(s, f"{where}.subgoals[]")
                for s in read_list(data, "subgoals", where, default=[])
            )
            goal.stale_turns = read_int(data, "stale_turns", where)
            goal.mention_count = read_int(data, "mention_count", where, lo=1)
            sankalpa._goals[goal_id] = goal
        return sankalpa
