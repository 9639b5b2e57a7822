"""Mind: what a session's turns and its background process (the subconscious) share.

AgentCSD keeps two layers apart that still talk: the conscious turn reads the current mood &
criteria, the pending S_loud impulses and its own quiet history; the subconscious cycle reads
what changed since its last cycle (ED_user, ED_agent, ID_loud, ID_quiet) and its own loud and
quiet histories. `Mind` is that shared state, for one process of one session. Turns and cycles
run as tasks of one event loop, but a test (and an app) may touch it from other threads, so
every read and write holds one lock and readers get immutable snapshots (`TurnMind`,
`CycleInput`): a turn that started keeps the mood it started with.

Nothing here writes a store: the session commits cycles and turns; `Mind` is rebuilt from the
store when a session resumes (`restore`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The inputs a cycle sees, in the seed's order, and the histories it keeps.
CHANGE_TAGS = ("ED_user", "ED_agent", "ID_loud", "ID_quiet")
HISTORIES = ("S_loud_history", "S_quiet_history", "ID_quiet_history")
SUMMARY_PREFIX = "[Previous summary]: "


@dataclass(frozen=True)
class TurnMind:
    """What a conscious turn reads: templates see it as `mind`."""

    process: str
    cycle: int
    mood: str
    criteria: str
    impulses: tuple[str, ...]  # S_loud impulses drained into this turn
    id_quiet_history: tuple[str, ...]

    def variables(self) -> dict[str, Any]:
        return {
            "process": self.process, "cycle": self.cycle, "mood": self.mood,
            "criteria": self.criteria, "impulses": list(self.impulses),
            "ID_quiet_history": list(self.id_quiet_history),
        }


@dataclass(frozen=True)
class CycleInput:
    """What one subconscious cycle reads: what changed since the last cycle (taken from the
    mind when the cycle begins; given back if the cycle fails) and the histories."""

    process: str
    cycle: int
    changes: Mapping[str, tuple[str, ...]]
    histories: Mapping[str, tuple[str, ...]]
    mood: str
    criteria: str

    def variables(self) -> dict[str, Any]:
        return {
            "process": self.process, "cycle": self.cycle, "mood": self.mood,
            "criteria": self.criteria,
            "changes": {k: list(v) for k, v in self.changes.items()},
            **{k: list(v) for k, v in self.histories.items()},
        }

    @property
    def quiet(self) -> bool:
        """Nothing changed since the last cycle."""
        return not any(self.changes.values())


@dataclass(frozen=True)
class CycleResult:
    """What a finished cycle hands back to the mind (from its steps' outputs)."""

    cycle: int
    mood: str | None = None
    criteria: str | None = None
    loud: str | None = None
    quiet: str | None = None
    trigger: bool = False


@dataclass
class _History:
    summary: str | None = None  # "[Previous summary]: ..." once older entries were folded
    entries: list[str] = field(default_factory=list)
    cycles: list[int] = field(default_factory=list)  # the cycle each entry came from

    def view(self) -> tuple[str, ...]:
        return ((self.summary,) if self.summary else ()) + tuple(self.entries)


class Mind:
    """The shared state of one background process and the turns of its session."""

    def __init__(self, process: str, *, history: int = 20) -> None:
        self.process = process
        self.history = history  # entries each history keeps verbatim (AgentCSD: 20)
        self._lock = threading.Lock()
        self.cycle = 0  # cycles completed
        self.mood = ""
        self.criteria = ""
        self._impulses: list[str] = []
        self._changes: dict[str, list[str]] = {tag: [] for tag in CHANGE_TAGS}
        self._histories: dict[str, _History] = {name: _History() for name in HISTORIES}
        self.moods: list[dict[str, Any]] = []  # every mood set in this session, in order

    # -- the conscious side -------------------------------------------------------------

    def for_turn(self, impulses: Sequence[str] = ()) -> TurnMind:
        """A snapshot for a turn; `impulses` the S_loud texts drained into it."""
        with self._lock:
            return TurnMind(self.process, self.cycle, self.mood, self.criteria, tuple(impulses),
                            self._histories["ID_quiet_history"].view())

    def drain_impulses(self) -> tuple[str, ...]:
        """Take every pending impulse (a user message or a spontaneous turn uses them)."""
        with self._lock:
            taken, self._impulses = tuple(self._impulses), []
            return taken

    @property
    def pending(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._impulses)

    def observe_turn(self, observed: Mapping[str, Iterable[str]]) -> None:
        """A committed turn: its ED_user, ED_agent, ID_loud and ID_quiet texts reach the next
        cycle; its ID_quiet joins the conscious layer's quiet history."""
        with self._lock:
            for tag in CHANGE_TAGS:
                texts = [t for t in observed.get(tag, ()) if t]
                self._changes[tag].extend(texts)
                if tag == "ID_quiet":
                    self._append("ID_quiet_history", texts, self.cycle)

    # -- the subconscious side ----------------------------------------------------------

    def begin_cycle(self) -> CycleInput:
        """The next cycle's input; what changed is taken (give it back with `undo`)."""
        with self._lock:
            changes = {tag: tuple(texts) for tag, texts in self._changes.items()}
            self._changes = {tag: [] for tag in CHANGE_TAGS}
            histories = {name: h.view() for name, h in self._histories.items() if name != "ID_quiet_history"}
            return CycleInput(self.process, self.cycle + 1, changes, histories, self.mood, self.criteria)

    def undo(self, taken: CycleInput) -> None:
        """A cycle failed: what it took is pending again, before anything newer."""
        with self._lock:
            for tag, texts in taken.changes.items():
                self._changes[tag][:0] = texts

    def end_cycle(self, result: CycleResult) -> bool:
        """Apply a committed cycle; True when the mood or criteria changed. Non-empty mood
        and criteria overwrite the current ones; a non-empty S_loud is queued as an impulse."""
        with self._lock:
            self.cycle = max(self.cycle, result.cycle)
            changed = False
            mood, criteria = (result.mood or "").strip(), (result.criteria or "").strip()
            if mood and mood != self.mood:
                self.mood, changed = mood, True
            if criteria and criteria != self.criteria:
                self.criteria, changed = criteria, True
            if changed:
                self.moods.append({"mood": self.mood, "criteria": self.criteria, "cycle": result.cycle})
            loud = (result.loud or "").strip()
            if loud:
                self._impulses.append(loud)
                self._append("S_loud_history", [loud], result.cycle)
            quiet = (result.quiet or "").strip()
            if quiet:
                self._append("S_quiet_history", [quiet], result.cycle)
            return changed

    # -- histories and their summaries ----------------------------------------------------

    def _append(self, name: str, texts: Sequence[str], cycle: int) -> None:
        h = self._histories[name]
        h.entries.extend(texts)
        h.cycles.extend([cycle] * len(texts))

    def overflowing(self) -> dict[str, tuple[str | None, tuple[str, ...], int, int]]:
        """Histories holding more than `history` entries: name -> (the summary so far, the
        older entries to fold, their first and last cycle)."""
        with self._lock:
            out = {}
            for name, h in self._histories.items():
                extra = len(h.entries) - self.history
                if extra > 0:
                    out[name] = (h.summary, tuple(h.entries[:extra]), h.cycles[0], h.cycles[extra - 1])
            return out

    def fold(self, name: str, summary: str, folded: int) -> str:
        """Replace the oldest `folded` entries of history `name` by `summary`; the summary as
        the history now starts ("[Previous summary]: ...")."""
        with self._lock:
            h = self._histories[name]
            h.summary = _prefixed(summary)
            del h.entries[:folded], h.cycles[:folded]
            return h.summary

    def histories(self) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return {name: h.view() for name, h in self._histories.items()}

    # -- resuming ------------------------------------------------------------------------

    def restore(self, history: Any) -> None:
        """Rebuild from the store (`SessionStore.mind_history`): the cycle count, mood,
        histories with their latest summaries, impulses never answered and what changed
        after the last cycle."""
        with self._lock:
            self.cycle = int(history.cycles)
            if history.moods:
                last = history.moods[-1]
                self.mood, self.criteria = last.mood, last.criteria
                self.moods = [{"mood": m.mood, "criteria": m.criteria, "cycle": m.cycle} for m in history.moods]
            summaries = history.summaries  # history layer -> its latest SummaryRecord
            after = history.last_cycle_commit
            answered_upto = 0  # the last commit that drained impulses (any turn does)
            for m in history.messages:
                if m.layer == "external" and m.tag in ("user", "ID_loud", "external_dialogue"):
                    answered_upto = max(answered_upto, m.commit_id)
            pending: list[str] = []
            for m in history.messages:
                cycle = m.cycle or 0
                theirs = getattr(m, "process", None) in (None, self.process)
                if not theirs:
                    continue
                if m.tag == "S_loud":
                    self._append("S_loud_history", [m.content], cycle)
                    if m.commit_id > answered_upto:
                        pending.append(m.content)
                elif m.tag == "S_quiet":
                    self._append("S_quiet_history", [m.content], cycle)
                elif m.tag == "ID_quiet":
                    self._append("ID_quiet_history", [m.content], cycle)
                if m.commit_id > after:
                    tag = _change_tag(m.layer, m.tag)
                    if tag:
                        self._changes[tag].append(m.content)
                    if m.tag == "ID_loud":  # what reached the user is also ED_agent
                        self._changes["ED_agent"].append(m.content)
            self._impulses = pending
            for name, h in self._histories.items():
                s = summaries.get(name)
                if s is not None:  # entries up to the summary's last cycle were folded into it
                    keep = [i for i, c in enumerate(h.cycles) if c > s.cycle_to]
                    h.entries = [h.entries[i] for i in keep]
                    h.cycles = [h.cycles[i] for i in keep]
                    h.summary = _prefixed(s.summary)
                if len(h.entries) > 4 * self.history:  # bounded even before the next summary
                    del h.entries[: len(h.entries) - 4 * self.history]
                    del h.cycles[: len(h.cycles) - 4 * self.history]


def _prefixed(summary: str) -> str:
    return summary if summary.startswith(SUMMARY_PREFIX) else SUMMARY_PREFIX + summary


def _change_tag(layer: str, tag: str) -> str | None:
    """Which cycle input a stored message of a turn is."""
    if tag == "user":
        return "ED_user"
    if tag == "ID_loud":
        return "ID_loud"
    if tag == "external_dialogue":
        return "ED_agent"
    if tag in ("ID_quiet", "internal_monologue"):
        return "ID_quiet"
    return None


def observed_in(messages: Iterable[Any], reply: str, kind: str) -> dict[str, list[str]]:
    """A committed turn's texts as the subconscious sees them: the user's message (ED_user),
    what reached the user (ED_agent), the internal dialog's loud and quiet parts."""
    out: dict[str, list[str]] = {tag: [] for tag in CHANGE_TAGS}
    for m in messages:
        tag = _change_tag(m.layer, m.tag)
        if tag == "ED_user" and kind != "message":
            continue
        if tag and tag != "ED_agent":
            out[tag].append(m.content)
    if reply:
        out["ED_agent"].append(reply)
    return out
